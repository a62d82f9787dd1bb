(ns pyprof.example.gpu-test
  "pyprof.example.gpu without a GPU: the same answers as Python's pyprof/gpu.py, on synthetic builds and
  cards and on fatbin sections written by Python's test helpers."
  (:require [clojure.java.io :as io]
            [clojure.test :refer [deftest is testing]]
            [pyprof.example.gpu :as gpu]
            [pyprof.native :as native]
            [pyprof.test-util :refer [python-json temp-dir]]))

(defn- build [wheel-name ptx]
  (let [w (gpu/wheel wheel-name)]
    {:library "/x/libmxnet.so" :name (w "name") :cuda (w "cuda") :sass (gpu/wheel-sass w)
     :ptx ptx :source "t"}))

(def ^:private cases
  [["NVIDIA H200" [9 0] "cu117" []] ["NVIDIA A100" [8 0] "cu102" []] ["NVIDIA L4" [8 9] "cu117" []]
   ["NVIDIA H200" [9 0] "cu117" [[8 6]]] ["B200" [10 0] "cu112" []] ["X" [12 1] "cu110" []]])

(deftest unsupported-agrees-with-python
  (let [ours (for [[card cc w ptx] cases] (gpu/unsupported card cc (build w ptx)))]
    (is (= "sm_50, sm_60, sm_70, sm_80, sm_86" (:archs (first ours))))
    (is (nil? (nth ours 2)) "SASS 8.6 runs on 8.9")
    (is (nil? (nth ours 3)) "PTX runs on newer cards")
    (is (nil? (gpu/unsupported "H200" [9 0] {:library "l" :sass nil :ptx nil})) "unknown: no claim")
    (when-let [py (python-json (str "import json, sys\nfrom pyprof import gpu\nout = []\n"
                                    "for card, cc, w, ptx in json.load(sys.stdin):\n"
                                    "    wh = gpu.wheel(w)\n"
                                    "    b = gpu.Build('/x/libmxnet.so', wh['name'], wh['cuda'], "
                                    "tuple(gpu.wheel_sass(wh)), tuple(map(tuple, ptx)), 't')\n"
                                    "    out.append(gpu.unsupported(card, tuple(cc), b))\n"
                                    "print(json.dumps(out))")
                               cases)]
      (is (= py (for [f ours] (some-> f (update-keys name))))))))

(deftest the-kernels-of-a-build-as-python-reads-them
  (let [dir (temp-dir)]
    (when-let [py (python-json
                   (str "import json, os, sys, pathlib\nsys.path.insert(0, os.environ['PYTHONPATH'] + '/tests')\n"
                        "from test_gpu import _elf, _fatbin\nfrom pyprof import gpu\n"
                        "d = pathlib.Path(json.load(sys.stdin))\n"
                        "libs = {'good': _elf(d / 'good.so', {b'.text': b'x' * 40, b'.nv_fatbin': "
                        "_fatbin([(2, 50), (2, 86)]) + bytes(8) + _fatbin([(2, 80), (1, 90)])}),\n"
                        "        'damaged': _elf(d / 'bad.so', {b'.nv_fatbin': _fatbin([(2, 86)]) "
                        "+ b'junk1234' + _fatbin([(2, 90)])}),\n"
                        "        'cpu': _elf(d / 'cpu.so', {b'.text': b'x' * 8})}\n"
                        "print(json.dumps({k: [p, gpu.read_fatbin(p)] for k, p in libs.items()}))")
                   (str dir))]
      (doseq [[k [path expected]] py]
        (testing k (is (= expected (gpu/read-fatbin path)))))
      (is (= [[[5 0] [8 0] [8 6]] [[9 0]]] (gpu/read-fatbin (first (py "good")))))))
  (is (nil? (gpu/read-fatbin (native/load!))) "the CPU build holds no CUDA kernels")
  (is (nil? (gpu/read-fatbin (io/file (temp-dir) "missing.so")))))

(deftest this-machine
  (is (= "mxnet" (gpu/distribution (native/load!))) "the CPU wheel installed libmxnet.so")
  (is (= {:name "mxnet" :sass nil :source "unknown"}
         (select-keys (gpu/describe-build (native/load!)) [:name :sass :source])))
  (let [card (gpu/cuda-device 0)]
    (is (or (nil? card) (string? (first card))) "no driver here: nil")))
