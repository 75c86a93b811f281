"""Make an array-api-tests checkout run on a library without complex dtypes (Ember has none).

The suite (at 55fcc60) assumes complex64 or complex128 exists in three places: these small,
idempotent edits make it skip what needs one instead of failing to import or collect.
Usage: python patch_suite.py PATH/TO/array-api-tests
"""

import pathlib
import sys

PATCHES = [
    # widest_complex_dtype = max(<empty list>) at import
    ("array_api_tests/dtype_helpers.py",
     "for dt in complex_dtypes], key=lambda x: x[1]\n)",
     "for dt in complex_dtypes], key=lambda x: x[1], default=(None,)\n)"),
    # test_signatures looks up the name of a None dtype while collecting
    ("array_api_tests/test_signatures.py",
     "cmplx_name = dh.dtype_to_name[dh.widest_complex_dtype]",
     "cmplx_name = dh.dtype_to_name.get(dh.widest_complex_dtype, 'complex128')"),
    # the complex special cases draw from a None dtype instead of skipping
    ("array_api_tests/test_special_cases.py",
     "        if case.is_complex:\n            dtype = dh.widest_complex_dtype\n",
     "        if case.is_complex:\n            if dh.widest_complex_dtype is None:\n"
     "                pytest.skip('no complex dtype in the namespace')\n"
     "            dtype = dh.widest_complex_dtype\n"),
]


def main(root: str) -> None:
    """Apply each patch that is not applied yet."""
    for rel, old, new in PATCHES:
        p = pathlib.Path(root) / rel
        s = p.read_text()
        if new not in s:
            if old not in s:
                sys.exit(f"patch_suite: {rel} does not contain the expected text; is this the right suite version?")
            p.write_text(s.replace(old, new))


if __name__ == "__main__":
    main(sys.argv[1])
