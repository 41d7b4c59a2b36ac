"""Tests of services/core/objectstore/."""
