package pyprof.jvm.capi;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;
import pyprof.jvm.MXNetException;

/**
 * Finds libmxnet.so, in the order of jvm/README.md ("Finding libmxnet.so"): {@code
 * -Dmxnet.library.path}, else {@code $MXNET_LIBRARY_PATH} (a file or its directory; when set, the
 * only path tried, so a JVM hosted by Python never loads a second copy), else
 * {@code .venv/lib/python3*&#47;site-packages/mxnet/libmxnet.so} in the directory of these
 * classes (or of their jar), then of {@code user.dir}, or up to {@link #MAX_LEVELS_UP} directories
 * above each (nearest first), else python3's {@code mxnet} package.
 */
final class LibraryLoader {
  static final String PROPERTY = "mxnet.library.path";
  static final String ENV = "MXNET_LIBRARY_PATH";
  private static final String LIB = "libmxnet.so";
  private static final int MAX_LEVELS_UP = 6;

  private LibraryLoader() {}

  /**
   * Offers the candidates in order to {@code load} (which returns null once loaded, else why not)
   * until one loads. Throws {@link MXNetException} "dlopen" listing every path tried and the fix.
   */
  static void find(Function<Path, String> load) {
    List<String> tried = new ArrayList<>();
    String given = System.getProperty(PROPERTY);
    String source = "-D" + PROPERTY;
    if (given == null || given.isBlank()) {
      given = System.getenv(ENV);
      source = "$" + ENV;
    }
    if (given != null && !given.isBlank()) {
      Path p = Paths.get(given.strip()).toAbsolutePath().normalize();
      if (attempt(Files.isDirectory(p) ? p.resolve(LIB) : p, source, load, tried)) {
        return;
      }
      throw notFound(tried);
    }
    List<Path> starts = starts();
    Set<Path> roots = new LinkedHashSet<>();
    for (Path start : starts) {
      Path p = start;
      for (int i = 0; i <= MAX_LEVELS_UP && p != null; i++, p = p.getParent()) {
        roots.add(p);
      }
    }
    boolean any = false;
    for (Path root : roots) {
      for (Path lib : venvLibraries(root.resolve(".venv").resolve("lib"))) {
        any = true;
        if (attempt(lib, "project .venv", load, tried)) {
          return;
        }
      }
    }
    if (!any) {
      tried.add("no .venv/lib/python3*/site-packages/mxnet/" + LIB + " in "
          + String.join(" or ", starts.stream().map(Path::toString).toArray(String[]::new))
          + ", or up to " + MAX_LEVELS_UP + " directories above");
    }
    Path fromPython = fromPython(tried);
    if (fromPython == null || !attempt(fromPython, "python3 on the PATH", load, tried)) {
      throw notFound(tried);
    }
  }

  private static boolean attempt(
      Path lib, String source, Function<Path, String> load, List<String> tried) {
    String why = Files.isRegularFile(lib) ? load.apply(lib) : "no such file";
    if (why != null) {
      tried.add(lib + " (" + source + "): " + why);
    }
    return why == null;
  }

  /** The directory of these classes (or of their jar), then {@code user.dir}. */
  private static List<Path> starts() {
    Set<Path> starts = new LinkedHashSet<>();
    try {
      Path classes = Paths.get(LibraryLoader.class.getProtectionDomain().getCodeSource()
          .getLocation().toURI()).toAbsolutePath().normalize();
      starts.add(Files.isDirectory(classes) ? classes : classes.getParent());
    } catch (Exception e) {
      // no code source (a custom class loader): user.dir only
    }
    starts.add(Paths.get(System.getProperty("user.dir", ".")).toAbsolutePath().normalize());
    return new ArrayList<>(starts);
  }

  private static List<Path> venvLibraries(Path lib) {
    if (!Files.isDirectory(lib)) {
      return List.of();
    }
    try (Stream<Path> dirs = Files.list(lib)) {
      return dirs.filter(d -> d.getFileName().toString().startsWith("python3"))
          .sorted()
          .map(d -> d.resolve("site-packages").resolve("mxnet").resolve(LIB))
          .collect(java.util.stream.Collectors.toList());
    } catch (IOException e) {
      return List.of(); // unreadable: nothing to offer from here
    }
  }

  /** Asks python3 on the PATH where the mxnet package lives, without importing it. */
  private static Path fromPython(List<String> tried) {
    String what = "python3 -c find_spec('mxnet'): ";
    String script = "import importlib.util, os\n"
        + "s = importlib.util.find_spec('mxnet')\n"
        + "print(os.path.join(os.path.dirname(s.origin), 'libmxnet.so') if s and s.origin else '')\n";
    try {
      Process proc = new ProcessBuilder("python3", "-c", script).redirectErrorStream(true).start();
      if (!proc.waitFor(30, TimeUnit.SECONDS)) {
        proc.destroyForcibly();
        tried.add(what + "timed out");
        return null;
      }
      String out = new String(proc.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
      if (proc.exitValue() != 0 || out.isEmpty()) {
        tried.add(what + "no mxnet package for python3 on the PATH");
        return null;
      }
      return Paths.get(out).toAbsolutePath().normalize();
    } catch (IOException e) {
      tried.add(what + e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      tried.add(what + "interrupted");
    }
    return null;
  }

  private static MXNetException notFound(List<String> tried) {
    String text = "cannot load libmxnet.so; tried:\n  - " + String.join("\n  - ", tried)
        + "\n  fix: pip install 'mxnet==1.9.1' 'numpy<1.24' into the project's .venv, or set "
        + ENV + " (or -D" + PROPERTY + ") to the absolute path of libmxnet.so";
    return new MXNetException("dlopen", text, text);
  }
}
