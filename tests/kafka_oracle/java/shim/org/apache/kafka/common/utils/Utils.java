package org.apache.kafka.common.utils;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;

// Stands in for Kafka's Utils (which pulls in most of the clients module): the one method the assignors call.
public final class Utils {
    private Utils() { }

    public static <T extends Comparable<? super T>> List<T> sorted(Collection<T> items) {
        List<T> out = new ArrayList<>(items);
        Collections.sort(out);
        return Collections.unmodifiableList(out);
    }
}
