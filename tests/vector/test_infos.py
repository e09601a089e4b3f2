"""Batching per-slot infos into gymnasium's dict-of-arrays convention."""

import numpy as np

from wrappers.vector.infos import batch_infos


def test_a_key_whose_type_differs_between_slots_becomes_an_object_array():
    # e.g. a grading report's test exit code: an int where the tests ran, None where grading was killed
    batched = batch_infos([(0, {"exit": 1, "report": {"code": 0}}), (1, {"exit": None, "report": {"code": None}})], 3)
    assert batched["exit"].tolist() == [1, None, 0] and batched["_exit"].tolist() == [True, True, False]
    assert batched["report"]["code"].tolist() == [0, None, 0] and batched["exit"].dtype == np.dtype(object)


def test_values_of_one_type_keep_a_typed_array():
    batched = batch_infos([(0, {"reward": 1.5}), (2, {"reward": 0.5})], 3)
    assert batched["reward"].dtype == np.float64 and batched["reward"].tolist() == [1.5, 0.0, 0.5]
