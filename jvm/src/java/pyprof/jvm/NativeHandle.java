package pyprof.jvm;

import com.sun.jna.Pointer;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * An owned MXNet handle: {@link #close()}, from any thread, frees it exactly once (an atomic
 * swap); a use after close throws {@link #closed()}. Closing under another thread's native call
 * with it is the caller's race, as in C ({@link ProfileObject} serialises its own).
 */
public abstract class NativeHandle implements AutoCloseable {
  private final AtomicReference<Pointer> handle;

  protected NativeHandle(Pointer handle) {
    this.handle = new AtomicReference<>(Objects.requireNonNull(handle, "null MXNet handle"));
  }

  /** The live handle. */
  public final Pointer pointer() {
    Pointer p = handle.get();
    if (p == null) {
      throw closed();
    }
    return p;
  }

  public final boolean isClosed() {
    return handle.get() == null;
  }

  @Override
  public final void close() {
    Pointer p = handle.getAndSet(null);
    if (p != null) {
      free(p); // LibMXNet gates the free as MXNet needs
    }
  }

  /** The error of a use after close. */
  protected RuntimeException closed() {
    return PyprofException.state(getClass().getSimpleName() + " is closed; fix: create a new one");
  }

  /** Releases {@code p} in libmxnet; called at most once. */
  protected abstract void free(Pointer p);

  @Override
  public String toString() {
    Pointer p = handle.get();
    return getClass().getSimpleName() + "[" + (p == null ? "closed" : p.toString()) + "]";
  }
}
