"""Reference tags for ACES4's quicksort ("qsort4"), transcribed from the behavioural notes
(/work/notes/scf_linalg.md section 1.1), independently of the Rust code.

Run: python3 qsort4.py   (prints 0-based tags, pasted into linalg.rs tests)
"""


def qsort4(keys, tags, lo, hi):
    p, ptag = keys[lo], tags[lo]
    l, r = lo, hi
    while l < r:
        while keys[r] >= p and l < r:
            r -= 1
        if l != r:
            keys[l], tags[l] = keys[r], tags[r]
            l += 1
        while keys[l] <= p and l < r:
            l += 1
        if l != r:
            keys[r], tags[r] = keys[l], tags[l]
            r -= 1
    keys[l], tags[l] = p, ptag
    pos = l
    if lo < pos:
        qsort4(keys, tags, lo, pos - 1)
    if hi > pos:
        qsort4(keys, tags, pos + 1, hi)


CASES = [
    [3.0, 1.0, 1.0, 2.0],
    [999.0, 999.0, 5.0, 4.0, 3.0],
    [1.0, 2.0, 2.0, 3.0],
    [2.0, 2.0, 2.0],
    [0.5, 999.0, -1.0, 999.0, 0.25, 7.0, -1.0],
    [999.0, 999.0, 1.4142135623730951, 0.7071067811865476],
]

for case in CASES:
    keys = list(case)
    tags = list(range(len(keys)))
    qsort4(keys, tags, 0, len(keys) - 1)
    print(case, "->", keys, tags)
