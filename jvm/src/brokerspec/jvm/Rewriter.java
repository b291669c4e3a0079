package brokerspec.jvm;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.FieldVisitor;
import org.objectweb.asm.Label;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;
import org.objectweb.asm.Type;
import org.objectweb.asm.commons.AdviceAdapter;

/**
 * One class's rewrite: every scheduling point becomes a call into {@link Scheduler} just before the operation.
 *
 * <p>The points are those of the Python runtime ({@code reference_impl/concurrent}): a monitor enter (a
 * {@code synchronized} block, and a {@code synchronized} method, whose flag is dropped and whose body is wrapped in
 * an explicit monitor enter and a release on every way out), a Lock's {@code lock}/{@code lockInterruptibly}
 * ({@code ReentrantLock}, either lock of a {@code ReentrantReadWriteLock}, or any call through {@code Lock}), every
 * method of an {@code Atomic*} or {@code Atomic*FieldUpdater} (the object reported is the updater's target, the
 * updater is reported as {@code via}), a read
 * or write of a volatile field, {@code CompletableFuture} complete / completeExceptionally / cancel / isDone /
 * join / get, and an executor's execute / submit / schedule. A release ({@code monitorexit}, {@code unlock}) is no
 * point; it is reported to the scheduler only so that it knows what each thread holds. A class initializer is left
 * alone: the JVM runs it under its own lock, which a parked thread must never hold.
 */
final class Rewriter {
    private static final String SCHEDULER = "brokerspec/jvm/Scheduler";
    private static final Set<String> LOCKS = Set.of("java/util/concurrent/locks/Lock",
            "java/util/concurrent/locks/ReentrantLock", "java/util/concurrent/locks/ReentrantReadWriteLock$ReadLock",
            "java/util/concurrent/locks/ReentrantReadWriteLock$WriteLock");
    private static final Set<String> FUTURE_POINTS = Set.of("complete", "completeExceptionally", "cancel", "isDone",
            "obtrudeValue", "obtrudeException");
    private static final Set<String> EXECUTORS = Set.of("java/util/concurrent/Executor",
            "java/util/concurrent/ExecutorService", "java/util/concurrent/ScheduledExecutorService",
            "java/util/concurrent/AbstractExecutorService", "java/util/concurrent/ThreadPoolExecutor",
            "java/util/concurrent/ScheduledThreadPoolExecutor", "java/util/concurrent/ForkJoinPool");
    private static final Set<String> SUBMITS = Set.of("execute", "submit", "schedule", "scheduleAtFixedRate",
            "scheduleWithFixedDelay", "invokeAll", "invokeAny");

    private final ClassLoader loader;
    private final Map<String, ClassInfo> infos = new HashMap<>();

    private Rewriter(ClassLoader loader) {
        this.loader = loader;
    }

    static byte[] rewrite(byte[] bytes, ClassLoader loader) {
        Rewriter rewriter = new Rewriter(loader);
        ClassReader reader = new ClassReader(bytes);
        ClassWriter writer = new ClassWriter(ClassWriter.COMPUTE_FRAMES) {
            @Override
            protected String getCommonSuperClass(String a, String b) {
                return rewriter.commonSuperClass(a, b);
            }
        };
        reader.accept(rewriter.new Classes(writer), ClassReader.SKIP_FRAMES);
        return writer.toByteArray();
    }

    /** What the rewrite needs of a class it does not load: its superclass, whether it is an interface, its
     * volatile fields. Read from the class file through the loader, so nothing is loaded (or rewritten) early. */
    private record ClassInfo(String superName, boolean isInterface, Set<String> volatiles) {
    }

    private ClassInfo info(String internalName) {
        if (infos.containsKey(internalName)) {
            return infos.get(internalName);
        }
        ClassInfo found = null;
        ClassLoader from = loader != null ? loader : ClassLoader.getSystemClassLoader();
        try (InputStream in = from.getResourceAsStream(internalName + ".class")) {
            if (in != null) {
                ClassReader reader = new ClassReader(in.readAllBytes());
                Set<String> volatiles = new HashSet<>();
                reader.accept(new ClassVisitor(Opcodes.ASM9) {
                    @Override
                    public FieldVisitor visitField(int access, String name, String desc, String sig, Object value) {
                        if ((access & Opcodes.ACC_VOLATILE) != 0) {
                            volatiles.add(name);
                        }
                        return null;
                    }
                }, ClassReader.SKIP_CODE | ClassReader.SKIP_DEBUG | ClassReader.SKIP_FRAMES);
                found = new ClassInfo(reader.getSuperName(), (reader.getAccess() & Opcodes.ACC_INTERFACE) != 0,
                        volatiles);
            }
        } catch (IOException e) {
            found = null;
        }
        infos.put(internalName, found);
        return found;
    }

    private String commonSuperClass(String a, String b) {
        Set<String> above = new HashSet<>();
        for (String c = a; c != null; ) {
            above.add(c);
            ClassInfo i = info(c);
            if (i == null || i.isInterface()) {
                return "java/lang/Object";
            }
            c = i.superName();
        }
        for (String c = b; c != null; ) {
            if (above.contains(c)) {
                return c;
            }
            ClassInfo i = info(c);
            if (i == null || i.isInterface()) {
                return "java/lang/Object";
            }
            c = i.superName();
        }
        return "java/lang/Object";
    }

    /** Whether {@code owner.name} is a volatile field (declared there or inherited), outside the JDK. */
    private boolean isVolatile(String owner, String name) {
        for (String c = owner; c != null && !c.startsWith("java/"); ) {
            ClassInfo i = info(c);
            if (i == null) {
                return false;
            }
            if (i.volatiles().contains(name)) {
                return true;
            }
            c = i.superName();
        }
        return false;
    }

    private static String simple(String internalName) {
        String name = internalName.substring(internalName.lastIndexOf('/') + 1);
        return name.replace('$', '.');
    }

    private final class Classes extends ClassVisitor {
        private String owner;
        private String dotted;

        Classes(ClassVisitor next) {
            super(Opcodes.ASM9, next);
        }

        @Override
        public void visit(int version, int access, String name, String sig, String superName, String[] interfaces) {
            owner = name;
            dotted = name.replace('/', '.');
            Site.rewritten(dotted);
            super.visit(version, access, name, sig, superName, interfaces);
        }

        @Override
        public MethodVisitor visitMethod(int access, String name, String desc, String sig, String[] exceptions) {
            boolean body = (access & (Opcodes.ACC_ABSTRACT | Opcodes.ACC_NATIVE)) == 0;
            if (!body || name.equals("<clinit>")) {
                return super.visitMethod(access, name, desc, sig, exceptions);
            }
            boolean synchronizedMethod = (access & Opcodes.ACC_SYNCHRONIZED) != 0;
            MethodVisitor next = super.visitMethod(access & ~Opcodes.ACC_SYNCHRONIZED, name, desc, sig, exceptions);
            return new Points(next, access, name, desc, owner, dotted, synchronizedMethod);
        }
    }

    private final class Points extends AdviceAdapter {
        private final String owner;
        private final String dotted;
        private final String method;
        private final boolean synchronizedMethod;
        private final boolean isStatic;
        private final Label start = new Label();
        private final Label handler = new Label();
        private boolean entered;
        private int line;
        private int entrySite = -1;

        Points(MethodVisitor next, int access, String name, String desc, String owner, String dotted,
               boolean synchronizedMethod) {
            super(Opcodes.ASM9, next, access, name, desc);
            this.owner = owner;
            this.dotted = dotted;
            this.method = name;
            this.synchronizedMethod = synchronizedMethod;
            this.isStatic = (access & Opcodes.ACC_STATIC) != 0;
        }

        private int site(String op, Site.Kind kind) {
            return Site.register(dotted, method, line, op, kind);
        }

        private void call(String name, String desc) {
            mv.visitMethodInsn(Opcodes.INVOKESTATIC, SCHEDULER, name, desc, false);
        }

        private void loadMonitor() {
            if (isStatic) {
                mv.visitLdcInsn(Type.getObjectType(owner));
            } else {
                mv.visitVarInsn(Opcodes.ALOAD, 0);
            }
        }

        private void releaseMonitor() {
            loadMonitor();
            mv.visitInsn(Opcodes.DUP);
            mv.visitInsn(Opcodes.MONITOREXIT);
            call("monitorExit", "(Ljava/lang/Object;)V");
        }

        @Override
        protected void onMethodEnter() {
            entered = true;
            if (synchronizedMethod) {
                entrySite = site("synchronized", Site.Kind.MONITOR);
                loadMonitor();
                mv.visitInsn(Opcodes.DUP);
                push(entrySite);
                call("monitorEnter", "(Ljava/lang/Object;I)V");
                mv.visitInsn(Opcodes.MONITORENTER);
                mv.visitLabel(start);
            }
        }

        @Override
        protected void onMethodExit(int opcode) {
            if (synchronizedMethod && opcode != Opcodes.ATHROW) {
                releaseMonitor();
            }
        }

        @Override
        public void visitLineNumber(int number, Label label) {
            line = number;
            if (entrySite >= 0) {
                Site.lineOf(entrySite, number);
            }
            super.visitLineNumber(number, label);
        }

        @Override
        public void visitMaxs(int maxStack, int maxLocals) {
            if (synchronizedMethod) {
                mv.visitLabel(handler);
                releaseMonitor();
                mv.visitInsn(Opcodes.ATHROW);
                mv.visitTryCatchBlock(start, handler, handler, null);
            }
            super.visitMaxs(maxStack, maxLocals);
        }

        @Override
        public void visitInsn(int opcode) {
            if (entered && opcode == Opcodes.MONITORENTER) {
                mv.visitInsn(Opcodes.DUP);
                push(site("monitorenter", Site.Kind.MONITOR));
                call("monitorEnter", "(Ljava/lang/Object;I)V");
                super.visitInsn(opcode);
            } else if (entered && opcode == Opcodes.MONITOREXIT) {
                mv.visitInsn(Opcodes.DUP);
                super.visitInsn(opcode);
                call("monitorExit", "(Ljava/lang/Object;)V");
            } else {
                super.visitInsn(opcode);
            }
        }

        @Override
        public void visitFieldInsn(int opcode, String fieldOwner, String name, String desc) {
            if (!entered || !isVolatile(fieldOwner, name)) {
                super.visitFieldInsn(opcode, fieldOwner, name, desc);
                return;
            }
            String field = simple(fieldOwner) + "." + name;
            switch (opcode) {
                case Opcodes.GETFIELD -> {
                    mv.visitInsn(Opcodes.DUP);
                    push(site("volatile read " + field, Site.Kind.ACCESS));
                    call("point", "(Ljava/lang/Object;I)V");
                }
                case Opcodes.PUTFIELD -> {
                    int value = newLocal(Type.getType(desc));
                    storeLocal(value);
                    mv.visitInsn(Opcodes.DUP);
                    push(site("volatile write " + field, Site.Kind.ACCESS));
                    call("point", "(Ljava/lang/Object;I)V");
                    loadLocal(value);
                }
                default -> {
                    mv.visitLdcInsn(Type.getObjectType(fieldOwner));
                    String what = opcode == Opcodes.GETSTATIC ? "volatile read " : "volatile write ";
                    push(site(what + field, Site.Kind.ACCESS));
                    call("point", "(Ljava/lang/Object;I)V");
                }
            }
            super.visitFieldInsn(opcode, fieldOwner, name, desc);
        }

        @Override
        public void visitMethodInsn(int opcode, String callee, String name, String desc, boolean itf) {
            if (!entered || opcode == Opcodes.INVOKESTATIC || name.equals("<init>")) {
                super.visitMethodInsn(opcode, callee, name, desc, itf);
                return;
            }
            String op = simple(callee) + "." + name;
            boolean noArgs = desc.startsWith("()");
            if (LOCKS.contains(callee) && noArgs && (name.equals("lock") || name.equals("lockInterruptibly"))) {
                mv.visitInsn(Opcodes.DUP);
                mv.visitInsn(Opcodes.DUP);
                push(site(op, Site.Kind.LOCK));
                call("point", "(Ljava/lang/Object;I)V");
                super.visitMethodInsn(opcode, callee, name, desc, itf);
                call("locked", "(Ljava/lang/Object;)V");
            } else if (LOCKS.contains(callee) && noArgs && name.equals("unlock")) {
                mv.visitInsn(Opcodes.DUP);
                super.visitMethodInsn(opcode, callee, name, desc, itf);
                call("unlocked", "(Ljava/lang/Object;)V");
            } else if (LOCKS.contains(callee) && name.equals("tryLock")) {
                pointBefore(opcode, callee, name, desc, itf, op, Site.Kind.ACCESS, false);
            } else if (callee.startsWith("java/util/concurrent/atomic/")) {
                pointBefore(opcode, callee, name, desc, itf, op, Site.Kind.ACCESS, callee.endsWith("FieldUpdater"));
            } else if (callee.equals("java/util/concurrent/CompletableFuture") && FUTURE_POINTS.contains(name)) {
                pointBefore(opcode, callee, name, desc, itf, op, Site.Kind.ACCESS, false);
            } else if (callee.equals("java/util/concurrent/CompletableFuture") && noArgs
                    && (name.equals("join") || name.equals("get"))) {
                pointBefore(opcode, callee, name, desc, itf, op, Site.Kind.JOIN, false);
            } else if (EXECUTORS.contains(callee) && SUBMITS.contains(name)) {
                pointBefore(opcode, callee, name, desc, itf, op, Site.Kind.ACCESS, false);
            } else {
                super.visitMethodInsn(opcode, callee, name, desc, itf);
            }
        }

        /** The point before an instance call: the arguments go to fresh locals while the receiver (or, for a field
         * updater, its target: the first argument) is reported, then come back. */
        private void pointBefore(int opcode, String callee, String name, String desc, boolean itf, String op, Site.Kind kind,
                                 boolean targetFirst) {
            Type[] args = Type.getArgumentTypes(desc);
            int[] locals = new int[args.length];
            for (int i = args.length - 1; i >= 0; i--) {
                locals[i] = newLocal(args[i]);
                storeLocal(locals[i]);
            }
            if (targetFirst && args.length > 0 && args[0].getSort() == Type.OBJECT) {
                mv.visitInsn(Opcodes.DUP);
                loadLocal(locals[0]);
                push(site(op, kind));
                call("pointVia", "(Ljava/lang/Object;Ljava/lang/Object;I)V");
            } else {
                mv.visitInsn(Opcodes.DUP);
                push(site(op, kind));
                call("point", "(Ljava/lang/Object;I)V");
            }
            for (int i = 0; i < args.length; i++) {
                loadLocal(locals[i]);
            }
            super.visitMethodInsn(opcode, callee, name, desc, itf);
        }
    }
}
