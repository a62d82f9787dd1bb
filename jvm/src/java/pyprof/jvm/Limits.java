package pyprof.jvm;

/**
 * The caps of a service's sessions, system properties read when a session is made: a bad value
 * is that constructor's error (and JMX {@code start}'s), so no session runs with it.
 */
final class Limits {
  private Limits() {}

  /** {@code -D<property>} as a positive long, else {@code dflt}; throws root.bad_limit. */
  static long limit(String property, long dflt) {
    String v = System.getProperty(property);
    if (v == null || v.isBlank()) {
      return dflt;
    }
    long n = -1;
    try {
      n = Long.parseLong(v.strip());
    } catch (NumberFormatException e) { // reported below
    }
    if (n > 0) {
      return n;
    }
    throw PyprofException.catalogue("root.bad_limit", "property", property, "value", v,
        "default", dflt);
  }

  /** Windows a service session may save ({@code -Dpyprof.maxWindows}, default 1000). */
  static long maxWindows() {
    return limit("pyprof.maxWindows", 1000);
  }

  /** Raw-trace bytes one window may record ({@code -Dpyprof.maxWindowBytes}, 256 MiB). */
  static long maxWindowBytes() {
    return limit("pyprof.maxWindowBytes", 256L << 20);
  }

  /** Bytes of window files one {@code dump(path)} may write (-Dpyprof.maxDumpBytes, 1 GiB). */
  static long maxDumpBytes() {
    return limit("pyprof.maxDumpBytes", 1L << 30);
  }

  /** A JMX session's duration when start names none ({@code -Dpyprof.jmx.maxDurationSeconds}). */
  static long jmxDefaultSeconds() {
    return Math.min(limit("pyprof.jmx.maxDurationSeconds", 600), jmxLimitSeconds());
  }

  /** No JMX session runs longer ({@code -Dpyprof.jmx.maxDurationLimitSeconds}, 3600). */
  static long jmxLimitSeconds() {
    return limit("pyprof.jmx.maxDurationLimitSeconds", 3600);
  }
}
