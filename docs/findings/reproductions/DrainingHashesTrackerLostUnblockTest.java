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
package org.apache.pulsar.broker.service;

import static org.mockito.Mockito.mock;
import static org.testng.Assert.assertNull;
import static org.testng.Assert.assertTrue;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.testng.annotations.Test;

/**
 * LK-6, the lost wake-up of docs/findings/keyshared-tracker-lost-unblock.md: a dispatch blocked by a draining entry
 * whose removal made no unblocking call. The dispatch thread is paused right after its {@code getEntry} (where
 * {@code shouldBlockStickyKeyHash} holds no lock) while the drainer's last ack removes the entry; then it resumes,
 * counts a block on the removed entry and reports the hash blocked, and nothing will ever unblock it.
 */
public class DrainingHashesTrackerLostUnblockTest {
    private static final String DISPATCH_THREAD = "lost-unblock-dispatch";

    /** Pauses the dispatch thread after its getEntry; every other caller runs through. */
    static class PausingTracker extends DrainingHashesTracker {
        final CountDownLatch entryRead = new CountDownLatch(1);
        final CountDownLatch resume = new CountDownLatch(1);

        PausingTracker(UnblockingHandler handler) {
            super("lost-unblock", handler);
        }

        @Override
        public DrainingHashEntry getEntry(int stickyKeyHash) {
            DrainingHashEntry entry = super.getEntry(stickyKeyHash);
            if (Thread.currentThread().getName().equals(DISPATCH_THREAD)) {
                entryRead.countDown();
                try {
                    if (!resume.await(10, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("the test never resumed the dispatch");
                    }
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            return entry;
        }
    }

    @Test
    public void blockedDispatchIsUnblockedWhenTheLastPendingAckGoes() throws Exception {
        List<Integer> unblocked = new CopyOnWriteArrayList<>();
        PausingTracker tracker = new PausingTracker(unblocked::add);
        Consumer drainer = mock(Consumer.class);
        Consumer newOwner = mock(Consumer.class);
        int hash = 1;
        tracker.addEntry(drainer, hash);  // the hash moved to newOwner; the drainer still holds one pending ack

        CompletableFuture<Boolean> blocked = new CompletableFuture<>();
        Thread dispatch = new Thread(() -> blocked.complete(tracker.shouldBlockStickyKeyHash(newOwner, hash)),
                DISPATCH_THREAD);
        dispatch.start();
        assertTrue(tracker.entryRead.await(10, TimeUnit.SECONDS), "the dispatch never read the entry");
        tracker.reduceRefCount(drainer, hash, false);  // the drainer's last ack: ref count 0, the entry removed
        tracker.resume.countDown();
        dispatch.join(10_000);

        assertNull(tracker.getEntry(hash));
        assertTrue(!blocked.get(1, TimeUnit.SECONDS) || !unblocked.isEmpty(),
                "blocked by a removed entry, and no stickyKeyHashUnblocked call followed: " + unblocked);
    }
}
