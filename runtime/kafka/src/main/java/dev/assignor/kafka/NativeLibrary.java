package dev.assignor.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads the bridge ({@code libassignor_kafka_bridge.so}) once per JVM: from
 * {@code java.library.path} when it is there (an operator who installs it next to the
 * broker's other native libraries), otherwise from the copy inside the plugin jar, extracted
 * to a private temporary file (deleted when the JVM exits).
 */
final class NativeLibrary {
    static final String NAME = "assignor_kafka_bridge";
    private static final String RESOURCE = "/native/lib" + NAME + ".so";

    private NativeLibrary() {
    }

    static {
        try {
            System.loadLibrary(NAME);
        } catch (UnsatisfiedLinkError notOnPath) {
            try {
                System.load(extract().toString());
            } catch (IOException | UnsatisfiedLinkError e) {
                UnsatisfiedLinkError error = new UnsatisfiedLinkError(
                    "cannot load the assignor bridge: lib" + NAME + ".so is neither on java.library.path ("
                        + notOnPath.getMessage() + ") nor loadable from the plugin jar (" + e + ")");
                error.initCause(e);
                throw error;
            }
        }
    }

    /** Nothing: loading the class loads the library. */
    static void ensureLoaded() {
    }

    private static Path extract() throws IOException {
        try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IOException(RESOURCE + " is not in the jar");
            }
            Path dir = Files.createTempDirectory("assignor-bridge");
            Path file = dir.resolve("lib" + NAME + ".so");
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            file.toFile().deleteOnExit();
            dir.toFile().deleteOnExit();
            return file;
        }
    }
}
