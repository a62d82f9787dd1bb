(ns pyprof.example.gpu
  "CUDA builds of MXNet 1.9.1: whether the build in use has kernels for a card, as Python's
  `pyprof/gpu.py` decides it (that module documents the rules and the fatbin layout). The wheels
  come from `gpu.json` (pyprof/spec on the classpath), the kernels from libmxnet.so's
  `.nv_fatbin` section, the card from the NVIDIA driver (libcuda, through JNA). `pyprof.example.context/gpu`
  throws `device.gpu_unsupported` when `unsupported` says so."
  (:require [clojure.java.io :as io]
            [clojure.string :as str]
            [pyprof.rules :as rules])
  (:import (com.sun.jna Function Memory NativeLibrary)
           (com.sun.jna.ptr IntByReference)
           (java.io File RandomAccessFile)
           (java.nio ByteBuffer ByteOrder)))

(set! *warn-on-reflection* true)

(def spec "gpu.json (string keys)." (rules/read-spec "gpu.json"))
(def mxnet-version (spec "mxnet_version"))
(def wheels (spec "wheels"))

(defn version
  "\"11.7\" -> [11 7]; \"12\" -> [12 0]."
  [s]
  (if-let [[_ a b] (re-matches #"\s*(\d+)(?:\.(\d+))?\s*" (str s))]
    [(parse-long a) (if b (parse-long b) 0)]
    (throw (IllegalArgumentException. (str "not a CUDA version: " (pr-str s) ". fix: write it as 11.7 (or 12)")))))

(def toolkit-for
  "The oldest CUDA toolkit that compiles for a compute capability newer than any wheel's
  (gpu.json toolkit_for): {[9 0] \"11.8\", ...}."
  (into {} (for [[c t] (spec "toolkit_for")] [(version c) t])))

(defn- cc
  "A compute capability from a fatbin's arch number: 86 -> [8 6]."
  [n] [(quot n 10) (rem n 10)])

(defn cc-str [[a b]] (str a "." b))
(defn sm [[a b]] (str "sm_" a b))

(defn runs-on?
  "SASS for X.Y runs on X.Z with Z >= Y; PTX for X.Y on any card of X.Y or newer."
  [card sass ptx]
  (boolean (or (some (fn [[ma mi]] (and (= ma (first card)) (<= mi (second card)))) sass)
               (some #(not (pos? (compare % card))) ptx))))

(defn wheel-sass [w] (mapv version (w "sass")))

(defn wheel
  "The wheel called `n`: \"mxnet-cu117\", \"cu117\", \"117\" or \"11.7\"; nil when none."
  [n]
  (let [k (str/replace (str/lower-case (str/trim (str n))) "_" "-")]
    (first (filter #(contains? #{(% "name") (subs (% "name") 6) (subs (% "name") 8) (% "cuda")} k)
                   wheels))))

(defn- le ^ByteBuffer [^RandomAccessFile f pos n]
  (let [b (byte-array n)]
    (.seek f (long pos))
    (.readFully f b)
    (.order (ByteBuffer/wrap b) ByteOrder/LITTLE_ENDIAN)))

(defn- fatbin-section
  "[offset size] of .nv_fatbin (or __nv_relfatbin) in an ELF64 little-endian file; nil if none."
  [^RandomAccessFile f]
  (let [h (le f 0 64)]
    (when (and (= 0x7f (.get h 0)) (= "ELF" (String. (.array h) 1 3 "ISO-8859-1"))
               (= 2 (.get h 4)) (= 1 (.get h 5)))
      (let [shoff (.getLong h 0x28) entsize (bit-and (.getShort h 0x3A) 0xffff)
            shnum (bit-and (.getShort h 0x3C) 0xffff) strndx (bit-and (.getShort h 0x3E) 0xffff)
            t (le f shoff (* entsize shnum))
            sec (fn [i] [(.getInt t (int (* i entsize))) (.getLong t (int (+ 24 (* i entsize))))
                         (.getLong t (int (+ 32 (* i entsize))))])
            [_ soff ssize] (sec strndx)
            strs (String. (.array (le f soff ssize)) "ISO-8859-1")
            nm (fn [at] (subs strs at (.indexOf strs "\u0000" (int at))))]
        (some (fn [i] (let [[at off size] (sec i)]
                        (when (#{".nv_fatbin" "__nv_relfatbin"} (nm at)) [off size])))
              (range shnum))))))

(defn read-fatbin
  "[sass ptx] compute capabilities (sorted) of the kernels in the ELF file at `path`; nil when
  it has none or its section is not laid out as nvcc writes it (then nothing is claimed)."
  [path]
  (try
    (with-open [f (RandomAccessFile. (str path) "r")]
      (when-let [[start size] (fatbin-section f)]
        (let [end (+ start size)]
          (loop [pos start, sass #{}, ptx #{}]
            (if (> (+ pos 16) end)
              (when (or (seq sass) (seq ptx)) [(vec (sort sass)) (vec (sort ptx))])
              (let [h (le f pos 16)]
                (if (not= (bit-and (.getInt h 0) 0xffffffff) 0xBA55ED50)
                  (when (and (zero? (mod pos 8)) (every? zero? (.array (le f pos 8))))
                    (recur (+ pos 8) sass ptx))
                  (let [hsize (bit-and (.getShort h 6) 0xffff), last (+ pos hsize (.getLong h 8))]
                    (when (and (>= hsize 16) (<= last end))
                      (let [r (loop [e (+ pos hsize), sass sass, ptx ptx]
                                (if (> (+ e 32) last)
                                  [sass ptx]
                                  (let [b (le f e 32), kind (.getShort b 0)
                                        ehsize (bit-and (.getInt b 4) 0xffffffff)
                                        padded (bit-and (.getInt b 8) 0xffffffff), arch (.getInt b 28)]
                                    (when (and (>= ehsize 32) (<= (+ e ehsize padded) last))
                                      (recur (+ e ehsize padded)
                                             (cond-> sass (and (= kind 2) (pos? arch)) (conj (cc arch)))
                                             (cond-> ptx (and (= kind 1) (pos? arch)) (conj (cc arch))))))))]
                        (when r (recur last (first r) (second r)))))))))))))
    (catch java.io.IOException _ nil)))

(defn distribution
  "The pip distribution (mxnet, mxnet-cu117, ...) that installed `library`; nil if none."
  [library]
  (let [site (.getParentFile (.getParentFile (.getCanonicalFile (io/file library))))]
    (some (fn [^File info]
            (let [meta (io/file info "METADATA") record (io/file info "RECORD")]
              (when (and (re-matches #"mxnet.*\.dist-info" (.getName info)) (.exists meta)
                         (.exists record) (str/includes? (slurp record) "libmxnet.so"))
                (some-> (re-find #"(?m)^Name:\s*(\S+)" (slurp meta)) second str/lower-case
                        (str/replace "_" "-")))))
          (sort (or (seq (.listFiles site)) [])))))

(defn describe-build
  "What is known of the build at `library`: {:library :name :cuda :sass :ptx :source}."
  [library]
  (let [n (distribution library)
        w (when (and n (str/starts-with? n "mxnet-cu")) (wheel (subs n 6)))
        found (read-fatbin library)]
    (merge {:library (str library) :name n :cuda (some-> w (get "cuda"))}
           (cond found {:sass (first found) :ptx (second found) :source "the kernels in libmxnet.so"}
                 w {:sass (wheel-sass w) :ptx []
                    :source (str "the published architecture list of " (w "name"))}
                 :else {:sass nil :ptx nil :source "unknown"}))))

(defn remedy
  "How to get a build with kernels for `card` (gpu.json remedy, as Python's gpu.remedy)."
  [card {:keys [name library]}]
  (let [words (spec "remedy")]
    (if-let [w (last (filter #(runs-on? card (wheel-sass %) []) wheels))]
      (rules/render (words "wheel") {:wheel (w "name") :version mxnet-version :build (or name library)
                                     :short (subs (w "name") 6) :cuda (w "cuda")})
      (let [newest (last wheels), top (last (sort (wheel-sass newest))), tk (toolkit-for card)]
        (rules/render (words "source")
                      {:version mxnet-version :cc (cc-str card) :newest (newest "name") :top (sm top)
                       :major (first top)
                       :needs (if tk
                                (rules/render (words "needs_toolkit") {:toolkit tk})
                                (rules/render (words "needs_any") {:sm (sm card)}))})))))

(defn unsupported
  "The catalogue fields of device.gpu_unsupported when `build` has no kernels that run on
  `card`; nil when it has, or when its kernels are unknown."
  [card-name card {:keys [sass ptx name library cuda] :as build}]
  (when (and (or sass ptx) (not (runs-on? card sass ptx)))
    {:card card-name :cc (cc-str card) :build (or name library) :cuda (or cuda "unknown")
     :archs (or (not-empty (str/join ", " (concat (map sm sass) (map #(str "PTX " (cc-str %)) ptx))))
                "no kernels")
     :remedy (remedy card build)}))

(defn cuda-device
  "[name major minor] of CUDA device `ordinal` from the NVIDIA driver; nil without one."
  [ordinal]
  (try
    (let [lib (NativeLibrary/getInstance "libcuda.so.1")
          call (fn [n & args] (.invokeInt ^Function (.getFunction lib ^String n) (object-array args)))
          dev (IntByReference.) major (IntByReference.) minor (IntByReference.) nm (Memory. 256)]
      (when (and (zero? (call "cuInit" (int 0))) (zero? (call "cuDeviceGet" dev (int ordinal)))
                 (zero? (call "cuDeviceGetName" nm (int 256) (.getValue dev)))
                 (zero? (call "cuDeviceGetAttribute" major (int 75) (.getValue dev)))
                 (zero? (call "cuDeviceGetAttribute" minor (int 76) (.getValue dev))))
        [(.getString nm 0) (.getValue major) (.getValue minor)]))
    (catch UnsatisfiedLinkError _ nil)
    (catch Exception _ nil)))
