"""softfab_fuzzer: one libFuzzer target and the test that replays its corpus.

With --config=fuzz (clang, see .bazelrc) `name` links libFuzzer's main; without it, the
standalone driver in fuzz/standalone_driver.cc, which runs the inputs it is given once each.
`name + "_corpus_test"` replays fuzz/corpus/<name>/ with the standalone driver in every
ordinary `bazel test //...` run (gcc, asan, ubsan), so every input ever saved, crashes
included, stays a regression test.
"""

def softfab_fuzzer(name, srcs, deps = []):
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        linkopts = select({
            "//fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            "//fuzz:libfuzzer": [],
            "//conditions:default": ["//fuzz:standalone_driver"],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "medium",
        srcs = srcs,
        args = ["fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = deps + ["//fuzz:standalone_driver"],
    )
