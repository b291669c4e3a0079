/**
 * A Key_Shared consumer as the broker sees it: an id, a name and its pending acks. Like upstream's
 * Consumer it does not override equals or hashCode, so every structure compares consumers by identity.
 */
final class Consumer {
    private final long consumerId;
    private final String consumerName;
    private final PendingAcksMap pendingAcks;
    private PendingAcksMap.PendingAcksAddHandler pendingAcksAddHandler;
    private PendingAcksMap.PendingAcksRemoveHandler pendingAcksRemoveHandler;

    Consumer(long consumerId, String consumerName) {
        this.consumerId = consumerId;
        this.consumerName = consumerName;
        // The suppliers read the fields at every call, so handlers can be installed at any time.
        this.pendingAcks = new PendingAcksMap(this, () -> pendingAcksAddHandler, () -> pendingAcksRemoveHandler);
    }

    long consumerId() {
        return consumerId;
    }

    String consumerName() {
        return consumerName;
    }

    PendingAcksMap getPendingAcks() {
        return pendingAcks;
    }

    void setPendingAcksAddHandler(PendingAcksMap.PendingAcksAddHandler handler) {
        this.pendingAcksAddHandler = handler;
    }

    void setPendingAcksRemoveHandler(PendingAcksMap.PendingAcksRemoveHandler handler) {
        this.pendingAcksRemoveHandler = handler;
    }
}
