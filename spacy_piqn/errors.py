"""Messages a user can act on: what went wrong, where, and the fix."""


class Errors:
    E001 = (
        "[E001] Gold span {span!r} ({start}-{end}) in example {example} has the label {label!r}, "
        "which the piqn component '{name}' does not know (labels: {labels}). Labels are fixed at "
        "nlp.initialize(): include examples with this label in the initialization data, or list it "
        "in [initialize.components.{name}.labels]."
    )
    E002 = (
        "[E002] Cannot add the label {label!r} to the piqn component '{name}' after it was "
        "initialized: its classifier has one output per label. Re-run nlp.initialize() (or "
        "spacy train) with the full label set."
    )
    E003 = (
        "[E003] The piqn component '{name}' found no labels in doc.spans[{key!r}] of its "
        "initialization examples. Check that the corpus writes spans under that key (python -m "
        "spacy_piqn convert --spans-key {key}) and that [corpora] keeps them (max_length = 0, "
        "gold_preproc = false: both would drop doc.spans)."
    )
    E004 = "[E004] decoding must be one of {modes}, got {value!r} (piqn component '{name}')."
    E005 = (
        "[E005] Could not load the weights of the piqn component '{name}' from {path}: {reason}. "
        "The file is missing or corrupted; save the pipeline again with nlp.to_disk()."
    )


class Warnings:
    W001 = (
        "[W001] {n_windows} window(s) of this batch hold more gold spans than the {n_queries} "
        "queries of the piqn component (e.g. doc {doc} tokens {start}-{end}: {n_gold} spans); "
        "{n_dropped} of them are left out of this update. Raise n_queries or use smaller windows."
    )
    W002 = (
        "[W002] {n} gold spans in this batch lie in no window of the piqn component (they cross a "
        "sentence boundary, or are longer than the window overlap) and are not trained on."
    )
    W003 = (
        "[W003] {n} gold spans in this batch do not align with the predicted tokenization and are "
        "not trained on (use the gold tokens, e.g. Doc(words=...), to avoid this)."
    )
