/*
 * Licensed to the Apache Software Foundation (ASF) under one
 * or more contributor license agreements.  See the NOTICE file
 * distributed with this work for additional information
 * regarding copyright ownership.  The ASF licenses this file
 * to you under the Apache License, Version 2.0 (the
 * "License"); you may not use this file except in compliance
 * with the License.  You may obtain a copy of the License at
 *
 *   http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing,
 * software distributed under the License is distributed on an
 * "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
 * KIND, either express or implied.  See the License for the
 * specific language governing permissions and limitations
 * under the License.
 */
package org.apache.pulsar.common.semaphore;

import static org.testng.Assert.assertEquals;
import static org.testng.Assert.assertTrue;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Delayed;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.common.semaphore.AsyncSemaphore.AsyncSemaphorePermit;
import org.testng.annotations.Test;

/**
 * SL-3 of docs/findings/topiclist-semaphore-lock-level.md, forced without any scheduler: a caller cancels the
 * future of a growing {@code update} while the executor grants it. The cancel must land between the grant's
 * {@code request.future.isDone()} and its {@code request.future.complete(permit)}; the grant calls
 * {@code request.cancelTimeoutTask()} in that window, and the timeout task is the {@code ScheduledFuture} the
 * semaphore's executor returned, so an executor whose timeout futures cancel the update on {@code cancel()} puts
 * the user's cancel exactly there (the 22-step schedule brokerspec's JVM exploration found, trace
 * {@code current-jvm-semaphore-locks-cancel-SL-3.json}). Only upstream's public API is used.
 *
 * <p>On the current code the grant swaps the old permit to 0, its {@code complete()} fails, and it gives back only
 * what it subtracted: the caller still holds the old permit, now worth nothing, so once it releases it the pool is
 * short by one permit for good. The finding's first fix (give the swapped value to the pool) leaves the pool whole
 * in the end but counts the caller's permit as available while the caller holds it. The corrected fix (put the
 * swapped value back into the old permit) passes both assertions.
 */
public class AsyncSemaphoreImplCancelDuringGrantTest {

    /** A single-threaded executor the test runs by hand; cancelling a timeout cancels {@link #cancelOnTimeoutCancel}. */
    private static final class HandRunExecutor extends AbstractExecutorService implements ScheduledExecutorService {
        final ArrayDeque<Runnable> tasks = new ArrayDeque<>();
        CompletableFuture<?> cancelOnTimeoutCancel;

        void runAll() {
            for (Runnable task = tasks.poll(); task != null; task = tasks.poll()) {
                task.run();
            }
        }

        private final class Timeout implements ScheduledFuture<Object> {
            @Override
            public boolean cancel(boolean mayInterruptIfRunning) {
                if (cancelOnTimeoutCancel != null) {
                    cancelOnTimeoutCancel.cancel(false); // the user's cancel, inside the grant's window
                }
                return true;
            }

            @Override
            public long getDelay(TimeUnit unit) {
                return Long.MAX_VALUE;
            }

            @Override
            public int compareTo(Delayed o) {
                return 0;
            }

            @Override
            public boolean isCancelled() {
                return false;
            }

            @Override
            public boolean isDone() {
                return false;
            }

            @Override
            public Object get() {
                throw new UnsupportedOperationException();
            }

            @Override
            public Object get(long timeout, TimeUnit unit) {
                throw new UnsupportedOperationException();
            }
        }

        @Override
        public void execute(Runnable command) {
            tasks.add(command);
        }

        @Override
        public ScheduledFuture<?> schedule(Runnable command, long delay, TimeUnit unit) {
            return new Timeout();
        }

        @Override
        public <V> ScheduledFuture<V> schedule(Callable<V> callable, long delay, TimeUnit unit) {
            throw new UnsupportedOperationException();
        }

        @Override
        public ScheduledFuture<?> scheduleAtFixedRate(Runnable command, long initialDelay, long period,
                                                      TimeUnit unit) {
            throw new UnsupportedOperationException();
        }

        @Override
        public ScheduledFuture<?> scheduleWithFixedDelay(Runnable command, long initialDelay, long delay,
                                                         TimeUnit unit) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void shutdown() {
        }

        @Override
        public List<Runnable> shutdownNow() {
            return List.of();
        }

        @Override
        public boolean isShutdown() {
            return false;
        }

        @Override
        public boolean isTerminated() {
            return false;
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
            return true;
        }
    }

    @Test
    public void cancelledGrowingUpdateKeepsTheOldPermitAndThePoolWhole() {
        HandRunExecutor executor = new HandRunExecutor();
        AsyncSemaphoreImpl semaphore = new AsyncSemaphoreImpl(2, 2, 10_000, executor, null);
        CompletableFuture<AsyncSemaphorePermit> first = semaphore.acquire(1, () -> false);
        executor.runAll();
        AsyncSemaphorePermit oldPermit = first.join();
        assertEquals(semaphore.getAvailablePermits(), 1);

        CompletableFuture<AsyncSemaphorePermit> grown = semaphore.update(oldPermit, 2, () -> false);
        executor.cancelOnTimeoutCancel = grown;
        executor.runAll(); // the grant: isDone() false, swap, subtract, cancelTimeoutTask() -> the cancel, complete()

        assertTrue(grown.isCancelled(), "the update was cancelled: the caller still holds its old permit");
        assertEquals(semaphore.getAvailablePermits(), 1,
                "while the caller holds its old permit (1 of 2), only 1 permit is available");
        semaphore.release(oldPermit);
        executor.runAll();
        assertEquals(semaphore.getAvailablePermits(), 2, "once the old permit is released, the pool is whole");
    }
}
