"""Label sets as data: a leaf package that imports nothing of medunlearn but ``medunlearn.errors``.

- :mod:`medunlearn.ontology.amnesia`: AMNESIA's disease categories and QA types.
- :mod:`medunlearn.ontology.biodivergence`: BioDivergence's six conflict classes and 13 divergence axes.
- :mod:`medunlearn.ontology.vocabulary`: the disease vocabulary (curated terms, ICD-10-CM titles, NegEx) that
  classifies AMNESIA notes and finds disease entities in BioDivergence claims.

Metrics, builders and baselines read their labels from here, so a metric never imports a benchmark package.
"""
