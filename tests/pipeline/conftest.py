"""One local Spark session for every pipeline test: the JVM start dominates, so it is paid once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from properties.pipeline.check import session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    spark = session("local[2]", shuffle_partitions=4)
    yield spark
    spark.stop()
