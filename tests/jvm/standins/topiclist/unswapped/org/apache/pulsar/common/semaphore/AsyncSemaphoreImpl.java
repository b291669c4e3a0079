package org.apache.pulsar.common.semaphore;

import java.util.Queue;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.LongConsumer;

/**
 * Stand-in (written by brokerspec) for a known-bad order of the semaphore, the lock model's {@code unswapped}: the
 * current code with {@code SemaphorePermit.releasePermits()} a volatile read and then a write of 0 instead of the
 * field updater's {@code getAndSet}, so a release and the grant can both read the old permit's value (docs/findings/
 * topiclist-semaphore-lock-level.md, "What the current order relies on": SL-1, SL-2, SL-3).
 */
public class AsyncSemaphoreImpl implements AsyncSemaphore, AutoCloseable {
    private final AtomicLong availablePermits;
    private final Queue<PendingRequest> queue;
    private final long maxPermits;
    private final long timeoutMillis;
    private final ScheduledExecutorService executor;
    private final boolean shutdownExecutor;
    private final LongConsumer queueLatencyRecorder;
    private final AtomicBoolean closed = new AtomicBoolean(false);
    private final Runnable processQueueRunnable = this::internalProcessQueue;
    private final ScheduledFuture<?> processQueueScheduledFuture;

    public AsyncSemaphoreImpl(long maxPermits, int maxQueueSize, long timeoutMillis) {
        this(maxPermits, maxQueueSize, timeoutMillis, maxPermits > 0 ? Executors.newSingleThreadScheduledExecutor()
                : null, maxPermits > 0, null);
    }

    public AsyncSemaphoreImpl(long maxPermits, int maxQueueSize, long timeoutMillis,
                              ScheduledExecutorService executor, LongConsumer queueLatencyRecorder) {
        this(maxPermits, maxQueueSize, timeoutMillis, executor, false, queueLatencyRecorder);
    }

    AsyncSemaphoreImpl(long maxPermits, int maxQueueSize, long timeoutMillis, ScheduledExecutorService executor,
                       boolean shutdownExecutor, LongConsumer queueLatencyRecorder) {
        this.availablePermits = new AtomicLong(maxPermits);
        this.maxPermits = maxPermits;
        this.queue = maxQueueSize > 0 ? new ArrayBlockingQueue<>(maxQueueSize) : new LinkedBlockingQueue<>();
        this.timeoutMillis = timeoutMillis;
        this.executor = executor;
        this.shutdownExecutor = shutdownExecutor;
        this.queueLatencyRecorder = queueLatencyRecorder;
        this.processQueueScheduledFuture = executor != null
                ? executor.schedule(processQueueRunnable, timeoutMillis / 2, TimeUnit.MILLISECONDS) : null;
    }

    @Override
    public CompletableFuture<AsyncSemaphorePermit> acquire(long permits, BooleanSupplier isCancelled) {
        return internalAcquire(permits, null, isCancelled);
    }

    private CompletableFuture<AsyncSemaphorePermit> internalAcquire(long permits, SemaphorePermit previousPermit,
                                                                    BooleanSupplier isCancelled) {
        validatePermits(permits);
        if (isUnbounded()) {
            return CompletableFuture.completedFuture(new SemaphorePermit(permits));
        }
        CompletableFuture<AsyncSemaphorePermit> future = new CompletableFuture<>();
        if (closed.get()) {
            future.completeExceptionally(new PermitAcquireAlreadyClosedException("Semaphore is closed"));
            return future;
        }
        PendingRequest request = new PendingRequest(permits, previousPermit, future, isCancelled);
        if (!queue.offer(request)) {
            future.completeExceptionally(new PermitAcquireQueueFullException("Semaphore queue is full"));
            return future;
        }
        ScheduledFuture<?> timeoutTask = executor.schedule(() -> {
            if (!request.future.isDone() && queue.remove(request)) {
                recordQueueLatency(Long.MAX_VALUE);
                future.completeExceptionally(new PermitAcquireTimeoutException("Permit acquisition timed out"));
                processQueue();
            }
        }, timeoutMillis, TimeUnit.MILLISECONDS);
        request.setTimeoutTask(timeoutTask);
        processQueue();
        return future;
    }

    private void validatePermits(long permits) {
        if (permits < 0) {
            throw new IllegalArgumentException("Invalid negative permits value: " + permits);
        }
        if (!isUnbounded() && permits > maxPermits) {
            throw new IllegalArgumentException("Requested permits=" + permits + " is larger than maxPermits="
                    + maxPermits);
        }
    }

    private boolean isUnbounded() {
        return maxPermits <= 0;
    }

    private void recordQueueLatency(long ageNanos) {
        if (queueLatencyRecorder != null) {
            queueLatencyRecorder.accept(ageNanos);
        }
    }

    @Override
    public CompletableFuture<AsyncSemaphorePermit> update(AsyncSemaphorePermit permit, long newPermits,
                                                          BooleanSupplier isCancelled) {
        validatePermits(newPermits);
        if (isUnbounded()) {
            return CompletableFuture.completedFuture(new SemaphorePermit(newPermits));
        }
        long oldPermits = permit.getPermits();
        if (newPermits - oldPermits > 0) {
            return internalAcquire(newPermits, castToImplementation(permit), isCancelled);
        }
        long leftoverPermits = castToImplementation(permit).releasePermits() - newPermits;
        if (leftoverPermits >= 0) {
            if (leftoverPermits > 0) {
                availablePermits.addAndGet(leftoverPermits);
                processQueue();
            }
            return CompletableFuture.completedFuture(new SemaphorePermit(newPermits));
        }
        return acquire(newPermits, isCancelled);
    }

    @Override
    public void release(AsyncSemaphorePermit permit) {
        if (isUnbounded()) {
            return;
        }
        long releasedPermits = castToImplementation(permit).releasePermits();
        if (releasedPermits > 0) {
            availablePermits.addAndGet(releasedPermits);
            processQueue();
        }
    }

    @Override
    public long getAvailablePermits() {
        return isUnbounded() ? Long.MAX_VALUE : availablePermits.get();
    }

    @Override
    public long getAcquiredPermits() {
        return isUnbounded() ? 0 : maxPermits - availablePermits.get();
    }

    @Override
    public int getQueueSize() {
        return queue.size();
    }

    private SemaphorePermit castToImplementation(AsyncSemaphorePermit permit) {
        if (permit instanceof SemaphorePermit semaphorePermit) {
            return semaphorePermit;
        }
        throw new IllegalArgumentException("Invalid permit type");
    }

    private void processQueue() {
        if (closed.get()) {
            return;
        }
        executor.execute(processQueueRunnable);
    }

    private synchronized void internalProcessQueue() {
        while (!closed.get() && !queue.isEmpty()) {
            long current = availablePermits.get();
            if (current <= 0) {
                break;
            }
            PendingRequest request = queue.peek();
            if (request == null) {
                break;
            }
            if (request.isCancelled.getAsBoolean()) {
                request.cancelTimeoutTask();
                queue.remove(request);
                request.future.completeExceptionally(
                        new PermitAcquireCancelledException("Permit acquisition was cancelled"));
                continue;
            }
            if (request.future.isDone()) {
                request.cancelTimeoutTask();
                queue.remove(request);
                continue;
            }
            if (request.getRequiredPermits() <= current) {
                long requiredPermitsReusingPrevious = request.getRequiredPermitsReusingPrevious();
                availablePermits.addAndGet(-requiredPermitsReusingPrevious);
                request.cancelTimeoutTask();
                queue.remove(request);
                SemaphorePermit permit = new SemaphorePermit(request.permits);
                boolean futureCompleted = request.future.complete(permit);
                if (!futureCompleted) {
                    availablePermits.addAndGet(requiredPermitsReusingPrevious);
                }
            } else {
                break;
            }
        }
    }

    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            if (processQueueScheduledFuture != null) {
                processQueueScheduledFuture.cancel(false);
            }
            while (!queue.isEmpty()) {
                PendingRequest request = queue.poll();
                request.cancelTimeoutTask();
                request.future.completeExceptionally(new PermitAcquireAlreadyClosedException("Semaphore is closed"));
            }
            if (shutdownExecutor) {
                executor.shutdownNow();
            }
        }
    }

    private static class PendingRequest {
        final long permits;
        private final SemaphorePermit previousPermit;
        final CompletableFuture<AsyncSemaphorePermit> future;
        private final BooleanSupplier isCancelled;
        private volatile ScheduledFuture<?> timeoutTask;

        PendingRequest(long permits, SemaphorePermit previousPermit, CompletableFuture<AsyncSemaphorePermit> future,
                       BooleanSupplier isCancelled) {
            this.permits = permits;
            this.previousPermit = previousPermit;
            this.future = future;
            this.isCancelled = isCancelled;
        }

        void setTimeoutTask(ScheduledFuture<?> timeoutTask) {
            this.timeoutTask = timeoutTask;
        }

        void cancelTimeoutTask() {
            if (timeoutTask != null) {
                timeoutTask.cancel(false);
                timeoutTask = null;
            }
        }

        long getRequiredPermits() {
            return previousPermit == null ? permits : permits - previousPermit.getPermits();
        }

        long getRequiredPermitsReusingPrevious() {
            return previousPermit == null ? permits : permits - previousPermit.releasePermits();
        }
    }

    private static class SemaphorePermit implements AsyncSemaphorePermit {
        private volatile long permits;

        SemaphorePermit(long permits) {
            this.permits = permits;
        }

        @Override
        public long getPermits() {
            return permits;
        }

        public long releasePermits() {
            long released = permits;
            permits = 0;
            return released;
        }

        @Override
        public String toString() {
            return "SemaphorePermit[permits=" + permits + "]";
        }
    }
}
