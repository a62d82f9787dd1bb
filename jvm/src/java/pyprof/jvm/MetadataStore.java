package pyprof.jvm;

import java.util.List;
import java.util.Map;

/**
 * The metadata events ({@code ph} M: MXNet's {@code process_name} per device, written only in
 * the first dump of a process) this process has read from its raw traces, which every window
 * and finished file carries first. One fact with one owner: a JVM on its own keeps them itself
 * ({@code pyprof.session.raw}); when JPype hosts this JVM, {@code pyprof.jvm.start()} installs
 * ({@link #use}) a proxy over Python's {@code pyprof.process.rawfile.METADATA}, so that a session
 * of either language sees the metadata the other read (the JVM may have read the process's
 * first raw file, the only one with the process names).
 *
 * <p>Events are maps with string keys, as {@code pyprof.trace.reader} reads them.
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

  /** Where {@link #use} keeps the installed store. */
  final class Installed {
    static volatile MetadataStore store;

    private Installed() {}
  }
}
