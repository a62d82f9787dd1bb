package pyprof.jvm;

import com.sun.jna.Pointer;

/**
 * A profiler task, frame, event or counter (ProfileHandle). Closing calls
 * {@code MXProfileDestroyHandle} once; destroying twice would be a use-after-free in MXNet.
 */
public final class ProfileObject extends NativeHandle {
  /** What the handle was created as; decides which calls make sense on it. */
  public enum Kind {
    TASK,
    FRAME,
    EVENT,
    COUNTER
  }

  private final Kind kind;
  private final String name;

  public ProfileObject(Kind kind, String name, Pointer handle) {
    super(handle);
    this.kind = kind;
    this.name = name;
  }

  public Kind kind() {
    return kind;
  }

  public String name() {
    return name;
  }

  @Override
  protected void free(Pointer p) {
    LibMXNet.check(LibMXNet.MXProfileDestroyHandle(p), "MXProfileDestroyHandle");
  }

  @Override
  public String toString() {
    return "ProfileObject[" + kind + " " + name + (isClosed() ? ", closed]" : "]");
  }
}
