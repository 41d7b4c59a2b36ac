"""The PDF steps: a library beside `services/core` (it imports core, never a service;
the renderer's finishing and PDF-tool jobs import it).

    steps.py, requests.py   the typed steps (events' tolerant forms, requests' strict ones)
    rules.py                what a pipeline must obey beyond its types (a 400 naming it)
    pipeline.py             run(inputs, steps, …) -> documents and a report, in a worker
    worker.py               Tools: pipelines in the jail's worker processes
    document.py             the one place PDFs are opened and written; qpdf's limits
    report.py               the report (JSON): steps, outputs, metadata, validations
    archive.py              one document as a PDF, several as a ZIP
    merge, split, pages (rotate, flatten), metadata, pdfa, pdfua, encrypt, attachments,
    facturx (+ invoice), marks, sign (+ signer), optimise, validate (+ signatures)
                            one module per step
    active, outlines, xmp, names, context
                            what several steps share
"""
