"""Tests of services/core/model/."""
