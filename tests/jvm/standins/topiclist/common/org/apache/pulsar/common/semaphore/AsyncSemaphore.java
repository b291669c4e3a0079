package org.apache.pulsar.common.semaphore;

import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;

/** Stand-in (written by brokerspec) for upstream's interface: the same methods, exceptions and permit type. */
public interface AsyncSemaphore {
    CompletableFuture<AsyncSemaphorePermit> acquire(long permits, BooleanSupplier isCancelled);

    CompletableFuture<AsyncSemaphorePermit> update(AsyncSemaphorePermit permit, long newPermits,
                                                   BooleanSupplier isCancelled);

    void release(AsyncSemaphorePermit permit);

    long getAvailablePermits();

    long getAcquiredPermits();

    int getQueueSize();

    abstract class PermitAcquireException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public PermitAcquireException(String message) {
            super(message);
        }
    }

    class PermitAcquireTimeoutException extends PermitAcquireException {
        private static final long serialVersionUID = 1L;

        public PermitAcquireTimeoutException(String message) {
            super(message);
        }
    }

    class PermitAcquireQueueFullException extends PermitAcquireException {
        private static final long serialVersionUID = 1L;

        public PermitAcquireQueueFullException(String message) {
            super(message);
        }
    }

    class PermitAcquireAlreadyClosedException extends PermitAcquireException {
        private static final long serialVersionUID = 1L;

        public PermitAcquireAlreadyClosedException(String message) {
            super(message);
        }
    }

    class PermitAcquireCancelledException extends PermitAcquireException {
        private static final long serialVersionUID = 1L;

        public PermitAcquireCancelledException(String message) {
            super(message);
        }
    }

    interface AsyncSemaphorePermit {
        long getPermits();
    }
}
