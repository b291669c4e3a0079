package brokerspec.jvm;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import java.util.ArrayList;
import java.util.List;

/**
 * The {@code -javaagent}: rewrites the scheduling points of the classes the user names, and no others.
 *
 * <p>The agent's argument is a comma-separated list of package prefixes or class names in dotted form
 * ({@code -javaagent:controller.jar=org.apache.pulsar.broker.service,org.apache.pulsar.common.semaphore});
 * a class is rewritten when its name equals one of them or starts with one followed by a dot. The JDK
 * ({@code java.}, {@code javax.}, {@code jdk.}, {@code sun.}, {@code com.sun.}) and the controller itself are
 * never rewritten, whatever the list says.
 */
public final class Agent {
    private Agent() {
    }

    private static final String[] NEVER = {"java/", "javax/", "jdk/", "sun/", "com/sun/", "brokerspec/jvm/",
            "org/objectweb/asm/"};

    public static void premain(String args, Instrumentation instrumentation) {
        List<String> named = parse(args);
        instrumentation.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String className, Class<?> redefined, ProtectionDomain domain,
                                    byte[] bytes) {
                if (className == null || !chosen(named, className)) {
                    return null;
                }
                try {
                    return Rewriter.rewrite(bytes, loader);
                } catch (Throwable e) {
                    System.err.println("brokerspec agent: cannot rewrite " + className.replace('/', '.') + ": " + e);
                    e.printStackTrace();
                    System.exit(70);
                    return null;
                }
            }
        });
    }

    static List<String> parse(String args) {
        List<String> named = new ArrayList<>();
        if (args != null) {
            for (String part : args.split(",")) {
                String name = part.trim();
                if (!name.isEmpty()) {
                    named.add(name.replace('.', '/'));
                }
            }
        }
        if (named.isEmpty()) {
            System.err.println("brokerspec agent: name the packages or classes to rewrite: "
                    + "-javaagent:controller.jar=PACKAGE[,PACKAGE...]");
            System.exit(64);
        }
        return named;
    }

    static boolean chosen(List<String> named, String className) {
        for (String never : NEVER) {
            if (className.startsWith(never)) {
                return false;
            }
        }
        for (String prefix : named) {
            if (className.equals(prefix) || className.startsWith(prefix + "/")
                    || className.startsWith(prefix + "$")) {
                return true;
            }
        }
        return false;
    }
}
