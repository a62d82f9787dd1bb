package pyprof.jvm;

import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * The one directory {@link ProfilerControl} (JMX) and {@link ProfilerSession} write under: the
 * constructor's argument, else {@code -Dpyprof.outputRoot}, else {@code <java.io.tmpdir>/pyprof},
 * created owner-only when missing. What they may write there: {@link Limits}.
 */
public final class OutputRoot {
  /** System property naming the root directory. */
  public static final String PROPERTY = "pyprof.outputRoot";

  private final Path root;

  /** Throws root.null, root.unusable. */
  public OutputRoot(String directory) {
    if (directory == null) {
      throw PyprofException.catalogue("root.null", "what", "the output root", "expected",
          "a directory (or use the constructor without it: -Dpyprof.outputRoot)");
    }
    Path dir;
    try {
      dir = Paths.get(directory).toAbsolutePath().normalize();
    } catch (InvalidPathException e) {
      throw unusable(directory, "not a path (" + e.getReason() + ")");
    }
    try {
      Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(
          PosixFilePermissions.fromString("rwx------")));
    } catch (FileAlreadyExistsException e) { // checked below
    } catch (IOException e) {
      throw unusable(directory, "cannot create it (" + e + ")");
    }
    if (!Files.isDirectory(dir)) {
      throw unusable(directory, "it is not a directory");
    }
    try {
      root = dir.toRealPath();
    } catch (IOException e) {
      throw unusable(directory, e.toString());
    }
  }

  private static PyprofException unusable(String directory, String reason) {
    return PyprofException.catalogue("root.unusable", "root", directory, "reason", reason);
  }

  /** The root named by {@code -Dpyprof.outputRoot}, else {@code <java.io.tmpdir>/pyprof}. */
  public static OutputRoot fromProperty() {
    return new OutputRoot(configured());
  }

  /** The directory {@link #fromProperty()} takes, as given (not created, not resolved). */
  static String configured() {
    String dir = System.getProperty(PROPERTY);
    return dir != null && !dir.isBlank() ? dir
        : Paths.get(System.getProperty("java.io.tmpdir"), "pyprof").toString();
  }

  /** The root directory (its real path). */
  public Path path() {
    return root;
  }

  /**
   * The file {@code path} names (relative: under the root), in a directory that exists under the
   * root, no link on the way leading out; {@code what} names it in errors. Throws root.bad_text,
   * root.is_root, root.outside, root.file_in_the_way, root.missing_directory.
   */
  public Path resolve(String what, String path) {
    if (path == null) {
      throw PyprofException.catalogue("root.null", "what", "the " + what, "expected",
          "a path under the output root, such as \"traces/run1.json\"");
    }
    Path p;
    try {
      p = root.resolve(Paths.get(path)).normalize();
    } catch (InvalidPathException e) { // a NUL, or a lone surrogate the file system cannot encode
      throw PyprofException.catalogue("root.bad_text", "what", what, "path", path, "reason",
          e.getReason());
    }
    if (!p.startsWith(root) || p.equals(root) || p.getFileName() == null) { // "." is no file
      throw PyprofException.catalogue(p.equals(root) ? "root.is_root" : "root.outside", "what",
          what, "path", path, "root", root.toString());
    }
    Path parent = p.getParent();
    Path existing = parent;
    while (existing != null && !Files.exists(existing)) {
      existing = existing.getParent();
    }
    Path real;
    try {
      real = existing == null ? null : existing.toRealPath();
    } catch (IOException e) {
      real = null;
    }
    if (real == null || !real.startsWith(root)) { // a link on the way leads out of the root
      throw PyprofException.catalogue("root.outside", "what", what, "path", path, "root",
          root.toString());
    }
    if (!Files.isDirectory(real)) { // a file in the way: creating the directory cannot help
      throw PyprofException.catalogue("root.file_in_the_way", "what", what, "path", path,
          "blocker", String.valueOf(existing), "root", root.toString());
    }
    if (!existing.equals(parent)) {
      throw PyprofException.catalogue("root.missing_directory", "what", what, "path", path,
          "directory", String.valueOf(parent), "root", root.toString());
    }
    return real.resolve(p.getFileName());
  }

  @Override
  public String toString() {
    return root.toString();
  }
}
