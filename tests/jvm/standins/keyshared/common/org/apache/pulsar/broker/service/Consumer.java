package org.apache.pulsar.broker.service;

/**
 * Stand-in (written by brokerspec, not upstream's code) for the part of Pulsar's {@code Consumer} that
 * {@code DrainingHashesTracker} and {@code PendingAcksMap} call: its id and name. Upstream's Consumer is built
 * from a connection and a subscription; the adapter allocates consumers without a constructor (as upstream's
 * tests' mocks are), so the constructor here is never called by it.
 */
public class Consumer {
    private final long consumerId;
    private final String consumerName;

    public Consumer(long consumerId, String consumerName) {
        this.consumerId = consumerId;
        this.consumerName = consumerName;
    }

    public long consumerId() {
        return consumerId;
    }

    public String consumerName() {
        return consumerName;
    }

    @Override
    public String toString() {
        return consumerName;
    }
}
