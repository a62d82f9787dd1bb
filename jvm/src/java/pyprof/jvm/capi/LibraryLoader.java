package pyprof.jvm.capi;

import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import pyprof.jvm.MXNetException;

/**
 * Finds libmxnet.so. Order:
 *
 * <ol>
 *   <li>system property {@code mxnet.library.path} (a file, or a directory holding libmxnet.so);
 *   <li>environment variable {@code MXNET_LIBRARY_PATH} (same);
 *   <li>{@code .venv/lib/python3*&#47;site-packages/mxnet/libmxnet.so} in the directory of these
 *       classes (classes directory or jar) or one of its ancestors, then in {@code user.dir} or
 *       one of its ancestors (up to {@link #MAX_LEVELS_UP} levels up, nearest first);
 *   <li>{@code python3 -c "importlib.util.find_spec('mxnet')"} on the PATH.
 * </ol>
 *
 * An explicit path (1 or 2) is authoritative: when it does not load, nothing else is tried, so a
 * JVM hosted by a Python process that already loaded libmxnet never loads a second copy.
 */
final class LibraryLoader {
  static final String PROPERTY = "mxnet.library.path";
  static final String ENV = "MXNET_LIBRARY_PATH";
  static final String LIB = "libmxnet.so";

  /** One candidate path and where it came from. */
  static final class Candidate {
    final Path path;
    final String source;
    /** Set by the user (property or environment): the only candidate tried. */
    final boolean explicit;

    Candidate(Path path, String source, boolean explicit) {
      this.path = path;
      this.source = source;
      this.explicit = explicit;
    }

    @Override
    public String toString() {
      return path + " (" + source + ")";
    }
  }

  private LibraryLoader() {}

  /**
   * Candidates in order; the explicit setting, when present, is the only one. Directories searched
   * in vain are noted in {@code tried}.
   */
  static List<Candidate> candidates(Map<String, String> env, List<String> tried) {
    List<Candidate> out = new ArrayList<>();
    String prop = System.getProperty(PROPERTY);
    if (prop != null && !prop.isBlank()) {
      out.add(new Candidate(asLibrary(Paths.get(prop.strip())), "-D" + PROPERTY, true));
      return out;
    }
    String var = env.get(ENV);
    if (var != null && !var.isBlank()) {
      out.add(new Candidate(asLibrary(Paths.get(var.strip())), "$" + ENV, true));
      return out;
    }
    Set<Path> seen = new LinkedHashSet<>();
    List<Path> roots = searchRoots();
    for (Path root : roots) {
      for (Path lib : venvLibraries(root.resolve(".venv"))) {
        if (seen.add(lib)) {
          out.add(new Candidate(lib, "project .venv", false));
        }
      }
    }
    if (out.isEmpty()) {
      StringBuilder sb = new StringBuilder("no .venv/lib/python3*/site-packages/mxnet/" + LIB + " in");
      String sep = " ";
      for (Path start : searchStarts()) {
        sb.append(sep).append(start);
        sep = " or ";
      }
      sb.append(", or up to ").append(MAX_LEVELS_UP).append(" directories above");
      tried.add(sb.toString());
    }
    return out;
  }

  /** A path given as a directory means the libmxnet.so inside it; relative paths are absolutized. */
  static Path asLibrary(Path p) {
    Path abs = p.toAbsolutePath().normalize();
    return Files.isDirectory(abs) ? abs.resolve(LIB) : abs;
  }

  /** How many ancestors above a start directory are searched for {@code .venv}. */
  static final int MAX_LEVELS_UP = 6;

  /**
   * Directories that may hold the {@code .venv}: the directory of these classes (a classes
   * directory, or the directory of the jar) and its ancestors, then {@code user.dir} and its
   * ancestors, each up to {@link #MAX_LEVELS_UP} levels up, nearest first. This finds the
   * repository's .venv from {@code jvm/target/classes}, {@code jvm/target/uberjar/x.jar},
   * {@code examples/matmul/target/uberjar/x.jar} and from any working directory inside the
   * repository.
   */
  static List<Path> searchRoots() {
    Set<Path> roots = new LinkedHashSet<>();
    for (Path start : searchStarts()) {
      Path p = start;
      for (int i = 0; i <= MAX_LEVELS_UP && p != null; i++, p = p.getParent()) {
        roots.add(p);
      }
    }
    return new ArrayList<>(roots);
  }

  /** The directory of these classes (or of their jar), then {@code user.dir}. */
  static List<Path> searchStarts() {
    Set<Path> starts = new LinkedHashSet<>();
    Path classes = codeLocation();
    if (classes != null) {
      Path dir = Files.isDirectory(classes) ? classes : classes.getParent();
      if (dir != null) {
        starts.add(dir);
      }
    }
    starts.add(Paths.get(System.getProperty("user.dir", ".")).toAbsolutePath().normalize());
    return new ArrayList<>(starts);
  }

  private static Path codeLocation() {
    try {
      CodeSource cs = LibraryLoader.class.getProtectionDomain().getCodeSource();
      return cs == null ? null : Paths.get(cs.getLocation().toURI()).toAbsolutePath().normalize();
    } catch (URISyntaxException | SecurityException | IllegalArgumentException e) {
      return null;
    }
  }

  private static List<Path> venvLibraries(Path venv) {
    List<Path> out = new ArrayList<>();
    Path lib = venv.resolve("lib");
    if (!Files.isDirectory(lib)) {
      return out;
    }
    try (Stream<Path> dirs = Files.list(lib)) {
      dirs.filter(d -> d.getFileName().toString().startsWith("python3"))
          .sorted()
          .map(d -> d.resolve("site-packages").resolve("mxnet").resolve(LIB))
          .forEach(out::add);
    } catch (IOException e) {
      // unreadable: nothing to offer from here
    }
    return out;
  }

  /** Asks python3 on the PATH where the mxnet package lives, without importing it. */
  static Candidate fromPython(List<String> tried) {
    String script =
        "import importlib.util, os\n"
            + "s = importlib.util.find_spec('mxnet')\n"
            + "print(os.path.join(os.path.dirname(s.origin), 'libmxnet.so') if s and s.origin else '')\n";
    try {
      Process proc =
          new ProcessBuilder("python3", "-c", script).redirectErrorStream(true).start();
      if (!proc.waitFor(30, TimeUnit.SECONDS)) {
        proc.destroyForcibly();
        tried.add("python3 -c find_spec('mxnet'): timed out");
        return null;
      }
      String out = new String(proc.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
      if (proc.exitValue() != 0 || out.isEmpty()) {
        tried.add("python3 -c find_spec('mxnet'): no mxnet package for python3 on the PATH");
        return null;
      }
      return new Candidate(Paths.get(out).toAbsolutePath().normalize(), "python3 on the PATH", false);
    } catch (IOException e) {
      tried.add("python3 -c find_spec('mxnet'): " + e.getMessage());
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      tried.add("python3 -c find_spec('mxnet'): interrupted");
      return null;
    }
  }

  static MXNetException notFound(List<String> tried) {
    StringBuilder sb = new StringBuilder("cannot load libmxnet.so; tried:");
    if (tried.isEmpty()) {
      sb.append("\n  (nothing)");
    }
    for (String t : tried) {
      sb.append("\n  - ").append(t);
    }
    sb.append("\n  fix: pip install 'mxnet==1.9.1' 'numpy<1.24' into the project's .venv, or set ")
        .append(ENV)
        .append(" (or -D")
        .append(PROPERTY)
        .append(") to the absolute path of libmxnet.so");
    String text = sb.toString();
    return new MXNetException("dlopen", text, text);
  }

  static boolean isFile(Path p) {
    return new File(p.toString()).isFile();
  }
}
