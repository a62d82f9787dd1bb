package pyprof.jvm;

import com.sun.jna.Pointer;
import java.util.Objects;

/**
 * A profiler domain (ProfileHandle). Not closeable: MXNet keeps domains for the life of the process
 * and must never be asked to destroy one.
 */
public final class ProfileDomain {
  private final String name;
  private final Pointer handle;

  public ProfileDomain(String name, Pointer handle) {
    this.name = name;
    this.handle = Objects.requireNonNull(handle, "null MXNet handle");
  }

  public String name() {
    return name;
  }

  public Pointer pointer() {
    return handle;
  }

  @Override
  public String toString() {
    return "ProfileDomain[" + name + "]";
  }
}
