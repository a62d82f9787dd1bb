package pyprof.example.djl;

/**
 * The service's own counters, {@code pyprof.example.djl:type=Service} on the platform MBean
 * server, beside pyprof's {@code pyprof:type=ProfilerControl}.
 */
public interface ServiceStatsMBean {
  /** Predictions that returned a result of the expected size. */
  long getRequests();

  /** Predictions that threw or returned a result of the wrong size. */
  long getFailedRequests();

  /** Worker threads, each with its own Predictor. */
  int getWorkers();

  /** {@code com.sun.jna.Native.VERSION} and the jar it was loaded from. */
  String getJna();

  /** The libmxnet files mapped into this process (one expected), separated by {@code :}. */
  String getLibmxnet();

  /** The version of MXNet DJL's engine reports. */
  String getMxnetVersion();
}
