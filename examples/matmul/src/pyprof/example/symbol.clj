(ns pyprof.example.symbol
  "The few symbol operations the example needs. Symbols are `pyprof.jvm.example.Symbol` (AutoCloseable)."
  (:require [pyprof.example.context :as context]
            [pyprof.example.ndarray :as nd]
            [pyprof.native :as native :refer [mx]])
  (:import (com.sun.jna Pointer)
           (pyprof.jvm.capi LibMXNet)
           (com.sun.jna.ptr IntByReference PointerByReference)
           (pyprof.jvm.example Executor MXNet NDArray Symbol)))

(set! *warn-on-reflection* true)

(defn- pointers
  "A native array of the handles `ps` (nil when empty). Keep it reachable during the call."
  ^Pointer [ps]
  (LibMXNet/pointers (into-array Pointer ps)))

(defn variable
  "A variable (placeholder) symbol `name` (C: MXSymbolCreateVariable)."
  ^Symbol [^String name]
  (Symbol. (native/out-pointer #(MXNet/MXSymbolCreateVariable name ^PointerByReference %))))

(defn- compose
  "Applies operator `op-name` to `inputs` as a new symbol `name` (C: MXSymbolCreateAtomicSymbol
  on the operator's NNVM handle, then MXSymbolCompose with positional inputs)."
  ^Symbol [^String op-name ^String name inputs]
  (let [sym (Symbol. (native/out-pointer
                      #(MXNet/MXSymbolCreateAtomicSymbol (nd/op-handle op-name) 0 nil nil
                           ^PointerByReference %)))]
    (try
      (let [args (pointers (map #(.pointer ^Symbol %) inputs))]
        (MXNet/MXSymbolCompose (.pointer sym) name (count inputs) nil args))
      sym
      (catch Throwable t
        (.close sym)
        (throw t)))))

(defn dot
  "Matrix product symbol `name` of `[lhs rhs]` (operator dot). The inputs stay owned by the
  caller."
  ^Symbol [name [lhs rhs]]
  (compose "dot" name [lhs rhs]))

(defn list-arguments
  "The argument names of `sym`, in the order MXNet binds them (C: MXSymbolListArguments)."
  [^Symbol sym]
  (let [n (IntByReference.)
        out (PointerByReference.)]
    (MXNet/MXSymbolListArguments (.pointer sym) n out)
    (if (pos? (.getValue n))
      (vec (.getStringArray (.getValue out) 0 (.getValue n)))
      [])))

(defn bind
  "An executor for `sym` on `ctx` with the input arrays `args`, a map from argument name
  (string or keyword) to NDArray; no gradients, no auxiliary states (C: MXExecutorBind). The
  arrays and the symbol stay owned by the caller; close the executor."
  ^Executor [^Symbol sym ctx args]
  (let [by-name (update-keys args name)
        names (list-arguments sym)
        missing (remove by-name names)
        extra (remove (set names) (keys by-name))]
    (when (or (seq missing) (seq extra))
      (throw (ex-info (str "bind: symbol arguments are " names
                           (when (seq missing) (str "; missing " (vec missing)))
                           (when (seq extra) (str "; unknown " (vec extra)))
                           ". fix: bind exactly the symbol's arguments, by name")
                      {:pyprof/error :invalid-option :arguments names
                       :missing (vec missing) :unknown (vec extra)})))
    (let [n (count names)
          in-args (pointers (map #(.pointer ^NDArray (by-name %)) names))
          no-grads (pointers (repeat n Pointer/NULL))
          grad-req (int-array n)]
      (Executor. (native/out-pointer
                  #(mx MXExecutorBind (.pointer sym) (int (context/dev-type ctx))
                       (int (:device-id ctx)) n in-args no-grads grad-req 0 nil
                       ^PointerByReference %))))))
