package brokerspec.jvm;

import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Delayed;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * A single-threaded executor whose one thread is a managed thread: its tasks run one point at a time under the
 * controller, like any other thread's code, and in submission order. A scenario hands it to the class under test
 * where upstream takes a {@code ScheduledExecutorService}. Delayed tasks never fire (there is no clock: every run is
 * shorter than a timeout), but can be cancelled. A task submitted from the driver's thread (while a scenario builds
 * its objects) runs at once, as the harness's code does. The thread waits, at a point that is blocked until a task
 * comes, and ends once {@link #finishWhenIdle} was called and nothing is left to run.
 */
public final class ManagedExecutor extends AbstractExecutorService implements ScheduledExecutorService {
    private final String name;
    private final ArrayDeque<Runnable> tasks = new ArrayDeque<>();
    private CompletableFuture<Void> arrived = new CompletableFuture<>();
    private boolean finishing;
    private boolean shutdown;
    private int failed;

    public ManagedExecutor(String name) {
        this.name = name;
    }

    /** Spawns the executor's managed thread, named as the executor. */
    public void spawn() {
        Scheduler.spawn(name, this::loop);
    }

    private void loop() {
        while (true) {
            Runnable task = tasks.poll();
            if (task != null) {
                try {
                    task.run();
                } catch (RuntimeException e) {
                    failed++; // upstream's executors log and go on (Runnables.catchingAndLoggingThrowables)
                }
            } else if (finishing) {
                return;
            } else {
                arrived = new CompletableFuture<>();
                Scheduler.awaitDone(arrived, name, "idle: waits for a task");
            }
        }
    }

    /** Lets the thread end once its queue is empty (a scenario calls it when the last caller is done). */
    public void finishWhenIdle() {
        finishing = true;
        arrived.complete(null);
    }

    /** Tasks whose exception escaped (upstream's executors log them). */
    public int failed() {
        return failed;
    }

    @Override
    public void execute(Runnable command) {
        if (!Scheduler.managed()) {
            command.run();
            return;
        }
        tasks.add(command);
        arrived.complete(null);
    }

    private static final class Timer implements ScheduledFuture<Object> {
        private boolean cancelled;

        @Override
        public long getDelay(TimeUnit unit) {
            return Long.MAX_VALUE;
        }

        @Override
        public int compareTo(Delayed other) {
            return 0;
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            boolean was = !cancelled;
            cancelled = true;
            return was;
        }

        @Override
        public boolean isCancelled() {
            return cancelled;
        }

        @Override
        public boolean isDone() {
            return cancelled;
        }

        @Override
        public Object get() {
            throw new UnsupportedOperationException("a delayed task never runs here");
        }

        @Override
        public Object get(long timeout, TimeUnit unit) {
            return get();
        }
    }

    @Override
    public ScheduledFuture<?> schedule(Runnable command, long delay, TimeUnit unit) {
        return new Timer();
    }

    @Override
    @SuppressWarnings("unchecked")
    public <V> ScheduledFuture<V> schedule(Callable<V> callable, long delay, TimeUnit unit) {
        return (ScheduledFuture<V>) (ScheduledFuture<?>) new Timer();
    }

    @Override
    public ScheduledFuture<?> scheduleAtFixedRate(Runnable command, long initialDelay, long period, TimeUnit unit) {
        return new Timer();
    }

    @Override
    public ScheduledFuture<?> scheduleWithFixedDelay(Runnable command, long initialDelay, long delay, TimeUnit unit) {
        return new Timer();
    }

    @Override
    public void shutdown() {
        shutdown = true;
    }

    @Override
    public List<Runnable> shutdownNow() {
        shutdown = true;
        List<Runnable> left = List.copyOf(tasks);
        tasks.clear();
        return left;
    }

    @Override
    public boolean isShutdown() {
        return shutdown;
    }

    @Override
    public boolean isTerminated() {
        return shutdown && tasks.isEmpty();
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) {
        return isTerminated();
    }
}
