package pyprof.example.djl;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The stress's report: the window files checked (a JSON object with a {@code traceEvents}
 * list, read by a streaming parser), the notifications matched to them, the control calls'
 * percentiles, and the verdict.
 */
final class Report {
  private Report() {}

  /** Every file under the services' output roots ({@code <out>/svc-<n>/windows}). */
  static List<Path> windowFiles(Path out, int services) {
    List<Path> files = new ArrayList<>();
    for (int i = 0; i < services; i++) {
      try (Stream<Path> s = Files.walk(out.resolve("svc-" + i).resolve("windows"))) {
        s.filter(Files::isRegularFile).sorted().forEach(files::add);
      } catch (IOException e) {
        // no windows
      }
    }
    return files;
  }

  /** Null when the file is a JSON object with a traceEvents list; else what is wrong. */
  static String validate(Path p, long[] events) {
    try (JsonParser jp = new JsonFactory().createParser(p.toFile())) {
      if (jp.nextToken() != JsonToken.START_OBJECT) {
        return "not a JSON object";
      }
      boolean found = false;
      while (jp.nextToken() == JsonToken.FIELD_NAME) {
        String field = jp.getCurrentName();
        JsonToken t = jp.nextToken();
        if ("traceEvents".equals(field) && t == JsonToken.START_ARRAY) {
          found = true;
          long n = 0;
          while (jp.nextToken() != JsonToken.END_ARRAY) {
            if (jp.currentToken() != JsonToken.START_OBJECT) {
              return "traceEvents holds a non-object";
            }
            jp.skipChildren();
            n++;
          }
          events[0] += n;
        } else {
          jp.skipChildren();
        }
      }
      if (jp.currentToken() != JsonToken.END_OBJECT || jp.nextToken() != null) {
        return "text after the object";
      }
      return found ? null : "no traceEvents list";
    } catch (IOException e) {
      return "not valid JSON: " + e.getMessage().lines().findFirst().orElse("");
    }
  }

  /** The report of a finished run (adds what it finds wrong to {@code st.problems}). */
  static Map<String, Object> build(Stress st, double wall) {
    List<Path> files = windowFiles(st.out, st.services);
    int valid = 0;
    int partial = 0;
    long[] events = {0};
    List<String> invalid = new ArrayList<>();
    Set<String> filePaths = new LinkedHashSet<>();
    for (Path f : new ArrayList<>(files)) {
      if (f.getFileName().toString().endsWith(".partial")) {
        // a window being written when its service died; in a service that lived: a problem
        files.remove(f);
        partial++;
        int service = Integer.parseInt(
            st.out.relativize(f).getName(0).toString().substring("svc-".length()));
        if (!st.abortedServices.contains(service)) {
          invalid.add(f + ": left unfinished by a service that did not abort");
        }
        continue;
      }
      filePaths.add(f.toAbsolutePath().toString());
      String why = validate(f, events);
      if (why == null) {
        valid++;
      } else {
        invalid.add(f + ": " + why);
      }
    }
    for (String p : st.reportedPaths) {
      if (!Files.isRegularFile(Paths.get(p))) {
        invalid.add(p + ": reported by stop() but not written");
      }
    }
    // stop() returns the windows written by then: all of them where windows are written before
    // it returns (no notifications), else some; the notifications count them all
    if (st.aborts == 0 && st.hangs == 0 && !Boolean.TRUE.equals(st.emitter)
        && st.windowsReported != files.size()) {
      invalid.add(files.size() + " window files for " + st.windowsReported
          + " windows stop() reported");
    }
    invalid.forEach(s -> st.problems.add("window: " + s));
    if (Boolean.TRUE.equals(st.emitter)) {
      if (st.savedNotes.get() != files.size()) {
        st.problems.add("notifications: " + st.savedNotes.get() + " " + Stress.SAVED + " for "
            + files.size() + " window files");
      }
      for (String p : st.notifiedPaths) {
        if (!filePaths.contains(Paths.get(p).toAbsolutePath().toString())) {
          st.problems.add("notification for " + p + ", which is no window file");
        }
      }
      st.failedNoteTexts.forEach(t -> st.problems.add("notification " + Stress.FAILED + ": " + t));
    }
    if (st.failedRequests > 0) {
      st.problems.add("failed requests: " + st.failedRequests);
    }
    if (st.jnaSeen.size() != 1) {
      st.problems.add("JNA: one expected, " + st.jnaSeen);
    }
    if (st.libmxnetSeen.size() != 1 || st.libmxnetSeen.iterator().next().contains(":")) {
      st.problems.add("libmxnet: one library expected, " + st.libmxnetSeen);
    }
    if (st.cyclesCompleted < st.cycles) {
      st.problems.add(st.cyclesCompleted + " of " + st.cycles + " cycles completed");
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("cycles", st.cyclesDone);
    r.put("cycles_completed", st.cyclesCompleted);
    r.put("cycles_wanted", st.cycles);
    r.put("options", st.options);
    r.put("jvm_opts", st.jvmOpts);
    r.put("steps", st.steps);
    r.put("step_ms", st.stepMs);
    r.put("workers", st.workers);
    r.put("pause_ms", st.pauseMs);
    r.put("services", st.services);
    r.put("aborts", st.aborts);
    r.put("abort_details", st.abortDetails);
    r.put("hangs", st.hangs);
    r.put("stalls", st.stalls);
    r.put("errors", st.errors.size());
    r.put("error_messages", st.errors.stream().limit(10).collect(Collectors.toList()));
    r.put("requests", st.requests);
    r.put("failed_requests", st.failedRequests);
    r.put("windows_reported", st.windowsReported);
    r.put("window_files", files.size());
    r.put("windows_valid", valid);
    r.put("partial_files", partial);
    r.put("window_events", events[0]);
    r.put("emitter", st.emitter);
    r.put("saved_notifications", st.savedNotes.get());
    r.put("failed_notifications", st.failedNotes.get());
    r.put("last_save", st.lastSave);
    r.put("jna", new ArrayList<>(st.jnaSeen));
    r.put("libmxnet", new ArrayList<>(st.libmxnetSeen));
    Map<String, Object> t = new LinkedHashMap<>();
    for (Map.Entry<String, List<Double>> e : st.timings.entrySet()) {
      List<Double> v = new ArrayList<>(e.getValue());
      Collections.sort(v);
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("n", v.size());
      m.put("p50_ms", round(percentile(v, 50)));
      m.put("p99_ms", round(percentile(v, 99)));
      m.put("max_ms", round(v.get(v.size() - 1)));
      m.put("ms", e.getValue().stream().map(Report::round).collect(Collectors.toList())); // in order
      t.put(e.getKey(), m);
    }
    r.put("timings", t);
    r.put("wall_s", round(wall));
    r.put("problems", st.problems.stream().limit(50).collect(Collectors.toList()));
    r.put("clean", st.problems.isEmpty() && st.errors.isEmpty());
    r.put("out", st.out.toString());
    return r;
  }

  /** Nearest-rank percentile of sorted values. */
  static double percentile(List<Double> sorted, int p) {
    int rank = (int) Math.ceil(p / 100.0 * sorted.size());
    return sorted.get(Math.max(0, rank - 1));
  }

  static double round(double x) {
    return Math.round(x * 10) / 10.0;
  }

  static void print(Stress st, Map<String, Object> r) {
    System.out.printf(Locale.ROOT, "stress: %s cycles, %s completed (start(\"%s\"), %d steps %d ms "
        + "apart, stop), %d service(s) of %d workers, %.1f s%n", r.get("cycles"),
        r.get("cycles_completed"), st.options, st.steps, st.stepMs, st.services, st.workers,
        (Double) r.get("wall_s"));
    System.out.printf(Locale.ROOT, "stress: aborts %d, hangs %d, control errors %d, requests %d, "
        + "failed requests %d%n", st.aborts, st.hangs, st.errors.size(), st.requests,
        st.failedRequests);
    System.out.printf(Locale.ROOT, "stress: windows %s reported by stop(), %s files, %s valid "
        + "(%s events), %s unfinished; notifications: %s%n", r.get("windows_reported"),
        r.get("window_files"), r.get("windows_valid"), r.get("window_events"),
        r.get("partial_files"), Boolean.TRUE.equals(st.emitter) ? st.savedNotes.get()
            + " saved, " + st.failedNotes.get() + " failed" : "the MBean emits none");
    @SuppressWarnings("unchecked")
    Map<String, Map<String, Object>> t = (Map<String, Map<String, Object>>) r.get("timings");
    for (Map.Entry<String, Map<String, Object>> e : t.entrySet()) {
      Map<String, Object> m = e.getValue();
      System.out.printf(Locale.ROOT, "stress: %-6s n=%-4s p50 %8s ms  p99 %8s ms  max %8s ms%n",
          e.getKey(), m.get("n"), m.get("p50_ms"), m.get("p99_ms"), m.get("max_ms"));
    }
    System.out.println("stress: jna " + st.jnaSeen + "; libmxnet " + st.libmxnetSeen);
    st.problems.stream().limit(20).forEach(p -> System.out.println("stress: problem: " + p));
  }
}
