(ns pyprof.claim-test
  "The JVM's trace-file claims (api.json trace_claims) within one JVM: the claim file's name and
  place, a second claim in the same process, giving back, and a claim directory that is not
  private. Claims across processes (Python, Clojure, the Java facade, a SIGKILLed owner) are
  tests/test_trace_claims.py."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [pyprof.claim :as claim]
            [pyprof.output :as output])
  (:import (java.nio.file Files)
           (java.nio.file.attribute PosixFilePermissions)
           (java.security MessageDigest)
           (pyprof.jvm Tracker)))

(defn- sha256-32 [^String s]
  (subs (apply str (map #(format "%02x" (bit-and (int %) 0xff))
                        (.digest (MessageDigest/getInstance "SHA-256") (.getBytes s "UTF-8"))))
        0 32))

(defn- tmp-trace []
  (str (Files/createTempDirectory "claim-test" (make-array java.nio.file.attribute.FileAttribute 0))
       "/t.json"))

(deftest the-claim-file-follows-the-rule
  (let [trace (tmp-trace)
        f (claim/claim-file (str trace "/../t.json"))]
    (is (= (str (claim/claim-dir) "/" (sha256-32 (output/abspath trace)) ".claim") f)
        "normalised first: one claim for every spelling")
    (is (= (claim/claim-file trace) f))
    (is (str/ends-with? (claim/claim-dir)
                        (str "/pyprof-claims-" (.getUid (com.sun.security.auth.module.UnixSystem.)))))))

(deftest a-claim-in-the-same-process-and-giving-it-back
  (let [trace (tmp-trace)
        t (Tracker/current)
        full (output/abspath trace)]
    (is (true? (claim/claim! "filename" trace)) "a new claim")
    (is (.holds t full))
    (is (= (str (.pid (java.lang.ProcessHandle/current)))
           (str/trim (slurp (claim/claim-file trace)))) "the claim file names its owner")
    (is (false? (claim/claim! "filename" trace)) "again in this process: held, not new")
    (claim/release! trace)
    (is (not (.holds t full)))
    (is (= "" (slurp (claim/claim-file trace))) "given back: emptied, not deleted")
    (is (true? (claim/claim! "filename" trace)) "claimed again")
    (claim/release! nil)
    (is (not (.holds t full)) "nil gives every claim back")))

(deftest a-claim-directory-that-is-not-private-is-refused
  ;; on a directory of its own: the process's claim directory is shared by every process of the
  ;; user (tests/test_trace_claims.py checks the error itself, under its own PYPROF_CLAIM_DIR)
  (let [private-dir! #'claim/private-dir!
        base (str (Files/createTempDirectory "claim-dir" (make-array java.nio.file.attribute.FileAttribute 0)))
        dir (str base "/pyprof-claims-x")]
    (is (nil? (private-dir! dir)) "made, rwx------")
    (is (= "rwx------" (PosixFilePermissions/toString
                        (Files/getPosixFilePermissions (.toPath (io/file dir))
                                                       (make-array java.nio.file.LinkOption 0)))))
    (is (nil? (private-dir! dir)) "there already: checked")
    (Files/setPosixFilePermissions (.toPath (io/file dir)) (PosixFilePermissions/fromString "rwxr-xr-x"))
    (is (= "not a private directory of this user (mode 0700)" (private-dir! dir)))
    (let [link (str base "/link")]
      (Files/setPosixFilePermissions (.toPath (io/file dir)) (PosixFilePermissions/fromString "rwx------"))
      (Files/createSymbolicLink (.toPath (io/file link)) (.toPath (io/file dir))
                                (make-array java.nio.file.attribute.FileAttribute 0))
      (is (some? (private-dir! link)) "a symlink is not the directory"))))

