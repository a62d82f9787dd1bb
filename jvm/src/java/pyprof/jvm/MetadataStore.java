package pyprof.jvm;

import java.util.List;
import java.util.Map;

/**
 * The metadata events ({@code ph} M: MXNet's {@code process_name} per device, in the first dump
 * of a process only) read from this process's raw traces, which every window carries first. A
 * JVM on its own keeps them itself ({@code pyprof.raw-file}); a JPype-hosted JVM uses a proxy over
 * Python's {@code pyprof.process.rawfile.METADATA} ({@link #use}), so that either language's
 * sessions see what the other read. Events are maps with string keys.
 */
public interface MetadataStore {
  /**
   * Adds the metadata events among {@code events} not known yet (by their content), in order,
   * and returns every known metadata event, in the order first seen.
   */
  List<Map<String, Object>> remember(List<Map<String, Object>> events);

  /** The store installed by {@link #use}, or null: the JVM keeps its own. */
  static MetadataStore current() {
    return Installed.store;
  }

  /** Makes {@code store} this process's metadata store; null restores the JVM's own. */
  static void use(MetadataStore store) {
    Installed.store = store;
  }

  /** Holds the installed store (an interface has no mutable field). */
  final class Installed {
    static volatile MetadataStore store;

    private Installed() {}
  }
}
