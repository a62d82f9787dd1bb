package pyprof.jvm;

import com.sun.jna.Pointer;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * An owned MXNet handle. {@link #close()} frees it exactly once, from any thread: the handle is
 * swapped to null atomically and only the thread that saw it non-null frees it; later calls do
 * nothing. Using a handle after close throws {@link PyprofException} of kind {@code invalid-state}.
 * Any thread may close a handle, not only the one that created it. (Closing a handle while another
 * thread is inside a native call with it is the caller's race, as in C; {@link ProfileObject}
 * serialises its own calls with close.)
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
      throw PyprofException.state(describe() + " is closed; fix: create a new one");
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

  /** How errors name this handle, e.g. {@code NDArray} or {@code Task 'step'}. */
  protected String describe() {
    return getClass().getSimpleName();
  }

  /** Releases {@code p} in libmxnet; called at most once. */
  protected abstract void free(Pointer p);

  @Override
  public String toString() {
    Pointer p = handle.get();
    return getClass().getSimpleName() + "[" + (p == null ? "closed" : p.toString()) + "]";
  }
}
