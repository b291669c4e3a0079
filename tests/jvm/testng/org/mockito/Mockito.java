package org.mockito;

import java.lang.reflect.Field;

/** Mockito's {@code mock} as the reproductions use it: an instance of the class with no constructor run and every
 * field at its default (enough for a collaborator the code under test only compares and hashes, as the tracker does
 * with its consumers). Mocked behaviour is not supported. */
public final class Mockito {
    private Mockito() {
    }

    public static <T> T mock(Class<T> type) {
        try {
            Field field = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
            field.setAccessible(true);
            Object unsafe = field.get(null);
            return type.cast(unsafe.getClass().getMethod("allocateInstance", Class.class).invoke(unsafe, type));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot allocate " + type.getName(), e);
        }
    }
}
