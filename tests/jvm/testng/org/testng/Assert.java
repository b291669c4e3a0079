package org.testng;

/** The TestNG assertions the reproductions use, with TestNG's argument order (actual, expected[, message]). */
public final class Assert {
    private Assert() {
    }

    public static void assertEquals(long actual, long expected) {
        assertEquals(actual, expected, null);
    }

    public static void assertEquals(long actual, long expected, String message) {
        if (actual != expected) {
            throw new AssertionError((message == null ? "" : message + " ") + "expected [" + expected + "] but found ["
                    + actual + "]");
        }
    }

    public static void assertTrue(boolean condition) {
        assertTrue(condition, null);
    }

    public static void assertNull(Object actual) {
        if (actual != null) {
            throw new AssertionError("expected [null] but found [" + actual + "]");
        }
    }

    public static void assertTrue(boolean condition, String message) {
        if (!condition) {
            throw new AssertionError(message);
        }
    }
}
