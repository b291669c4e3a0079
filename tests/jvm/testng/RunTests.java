import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import org.testng.annotations.Test;

/** Runs every @Test method of the classes named, in declaration order; prints PASS or FAIL per method; exits 1 on
 * a failure (brokerspec's runner for the reproductions, standing in for TestNG's). */
public final class RunTests {
    public static void main(String[] args) throws Exception {
        boolean failed = false;
        for (String name : args) {
            Class<?> type = Class.forName(name);
            for (Method method : type.getDeclaredMethods()) {
                if (!method.isAnnotationPresent(Test.class)) {
                    continue;
                }
                try {
                    method.invoke(type.getDeclaredConstructor().newInstance());
                    System.out.println("PASS " + name + "." + method.getName());
                } catch (InvocationTargetException e) {
                    failed = true;
                    System.out.println("FAIL " + name + "." + method.getName() + ": " + e.getCause());
                }
            }
        }
        System.exit(failed ? 1 : 0);
    }
}
