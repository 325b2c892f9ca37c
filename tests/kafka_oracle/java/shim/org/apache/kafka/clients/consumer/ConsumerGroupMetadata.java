package org.apache.kafka.clients.consumer;

// Stands in for Kafka's class (which pulls in the request classes): assignors only read the generation.
public class ConsumerGroupMetadata {
    public int generationId() {
        return -1;
    }
}
