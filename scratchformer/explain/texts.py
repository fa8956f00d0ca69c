"""Every sentence of the step explanations, kept as data: str.format templates with named placeholders.

TEXTS is keyed by step kind (scratchformer.recording.trace.KINDS) and by a few variants "kind.variant". A kind's
entry has "what", "why" and "numbers"; a variant entry may hold only the fields that differ (the rest come from its
kind).
"kind.plain" holds a numbers text that needs no other step, used when a sibling step is missing, and "step" is the
last resort for anything else. numbers.py computes the placeholder values and picks the variant.

Placeholders every step has: {d_model} {h} (heads) {d_k} {d_attn} (h·d_k, d_model in the paper) {d_ff} {shape}
{formula} {n_pos} (positions on the step's position axis) {side} ("source"/"target") {vocab} {batch_no} {b_note}
("" or ", in batch item 2 of 4"), {norm_name} ("LayerNorm"/"RMSNorm"), the bias fragments {plus_b} (" + b" or ""),
{w1_b1} ("W_1 and b_1" or "W_1"), {and_b2}, {plus_b2}, {wo_b} ("W^O and b" or "W^O"), and the tensor's {min} {max}
{mean} {std} for that batch item. Tokens arrive quoted ('girl'). Numbers print with three
significant figures unless the placeholder gives a format, as in {sqrt_dk:.2f}. Positions count from 1.
"""

TEXTS: dict[str, dict[str, str]] = {
    # ---------------------------------------------------------------- embeddings
    "tokens": {
        "what": "The {side} text is split into {n_tokens}, and each token is replaced by its id: its row number "
                "in a vocabulary of {vocab} entries.",
        "why": "A network computes only with numbers; the id is what selects the token's vector from the embedding "
               "table in the next step.",
        "numbers": "{ids}{b_note}.",
    },
    "tokens.target": {
        "what": "The decoder's input: the start token {start} followed by the target, i.e. the target shifted one "
                "place to the right ({n_tokens}, vocabulary of {vocab}).",
        "why": "Position t has to predict token t+1. With the start token in front, the token a position must guess is "
               "never part of its own input, so the whole target can go through in one pass (teacher forcing).",
    },
    "tokens.target@text": {  # a decoder-only model (GPT-2): the text is its only input
        "what": "The model's input: the start token {start} followed by the text ({n_tokens}, vocabulary of "
                "{vocab}); when Run continued the text, its new tokens follow.",
        "why": "Position t has to predict token t+1. Reading the whole text in one pass is possible because the "
               "causal mask stops each position from seeing the tokens after it.",
    },
    "embedding": {
        "what": "Each token id picks its row of the embedding table E ({vocab} × {d_model}): one learned vector of "
                "{d_model} numbers per token ({n_tokens} here).",
        "why": "Ids are arbitrary labels, while learned vectors can put tokens that are used alike close together. "
               "Picking a row is the same as multiplying a one-hot vector by E.",
        "numbers": "E holds {vocab} × {d_model} = {table_size} numbers; {tok} (id {tok_id}) gets the row that starts "
                   "[{row_head}, …]. The looked-up vectors have std {std}.",
    },
    "embedding.scaled": {
        "what": "Every embedding vector is multiplied by √d_model = √{d_model} = {sqrt_dm:.2f}.",
        "why": "Embedding entries start out small, and the positional encoding added next lies in [−1, 1]; scaling "
               "makes the token's own vector comparable in size, so position does not drown out meaning.",
        "numbers": "√{d_model} = {sqrt_dm:.2f}, so the std of the vectors goes from {std_before} to {std_after}.",
    },
    "embedding.scaled.plain": {"numbers": "√{d_model} = {sqrt_dm:.2f}; the scaled vectors have std {std}."},
    "positional_encoding": {
        "what": "A fixed table gives every position its own pattern of {d_model} numbers ({positions} used here): "
                "dimensions 2i and 2i+1 hold the sine and cosine of pos / 10000^(2i/{d_model}), a wave with its own "
                "wavelength.",
        "why": "Attention alone ignores order (shuffle the tokens and its outputs are just shuffled), so position must "
               "be written into the vectors. Waves of many lengths give every position a distinct code, and a shift "
               "by k positions rotates each sine/cosine pair the same way wherever it starts, so distances are easy "
               "to read.",
        "numbers": "Wavelengths run from 2π ≈ 6.28 positions (dimensions 0 and 1) to {max_wavelength} positions "
                   "({last_dims}). At position {n_pos} (pos = {pos} in the formula) dimensions 0 and 1 hold "
                   "sin({pos}) = {sin0} and cos({pos}) = {cos0}, while the slowest wave, dimension {slow_dim}, "
                   "still reads {slow}.",
    },
    "positional_encoding.halves": {
        "what": "The paper's sinusoids in Marian's layout, a departure from the paper's interleaving: the first "
                "{n_sin} dimensions hold the sines and the last {n_cos} the cosines of pos / 10000^(2i/{d_model}).",
        "why": "Attention alone ignores order, so position must be written into the vectors; waves of many lengths "
               "give every position a distinct code. Only the order of the dimensions differs from the paper, and "
               "the learned weights absorb that.",
        "numbers": "Wavelengths run from 2π ≈ 6.28 positions (dimensions 0 and {n_sin}) to {max_wavelength} "
                   "positions ({last_dims}). At position {n_pos} (pos = {pos} in the formula) dimension 0 holds "
                   "sin({pos}) = {sin0} and dimension {n_sin} holds cos({pos}) = {cos0}.",
    },
    "positional_encoding.learned": {
        "what": "A learned table P ({max_len} × {d_model}) gives each position a trained vector; rows 1–{n_pos} are "
                "used here. This departs from the paper's fixed sinusoids, as BERT and GPT do.",
        "why": "Attention alone ignores order, so position must be added somehow. A learned table lets training "
               "choose what each position looks like, at the price of a hard limit of {max_len} positions; the "
               "paper tried it and reported nearly the same results as sinusoids.",
        "numbers": "The used rows range from {min} to {max} (std {std}); neighbouring positions have an average "
                   "cosine similarity of {neighbour_cos}.",
    },
    "positional_encoding.none": {
        "what": "This model adds no position information (positional = none, a departure from the paper): the table "
                "is all zeros.",
        "why": "Without positions, attention sees the input as a bag of tokens; only a causal mask, if there is one, "
               "tells positions apart.",
        "numbers": "All {n_pos} × {d_model} values are 0.",
    },
    "positional_encoding.relative": {
        "what": "This model adds no position vector to its inputs (positional = none, a departure from the paper): the "
                "table is all zeros. Position enters later, inside every self-attention, as a relative position "
                "bias (T5).",
        "why": "Instead of telling each token where it is, T5 tells attention how far apart two tokens are: a learned "
               "number per head for each distance bucket is added to the attention scores. Only distances matter, "
               "so the same pattern works at any position and for texts longer than those seen in training.",
        "numbers": "All {n_pos} × {d_model} values are 0; the bias comes in the first self-attention layer of each "
                   "stack.",
    },
    "positional_encoding.rotary": {
        "what": "This model adds no position vector to its inputs: the table is all zeros. Position enters inside "
                "every self-attention instead, by rotating the queries and keys (rotary positions, RoPE), a "
                "departure from the paper's added sinusoids.",
        "why": "The paper writes each token's position into its vector once, at the bottom, where it must survive "
               "every layer. RoPE (Su et al. 2021) uses the same sines and cosines as rotation angles in each "
               "attention, so that a score depends on how far apart two tokens are — what attention needs — and "
               "the input itself carries only what each token is.",
        "numbers": "All {n_pos} × {d_model} values are 0; the rotations come in each layer's self-attention, right "
                   "after the queries and keys are split into heads.",
    },
    "positional_encoding.plain": {"numbers": "Its values range from {min} to {max} (std {std})."},
    "input": {
        "what": "Each token's vector and its position's vector are added element by element: {n_pos} × {d_model} "
                "numbers, one vector per position, enter the first layer.",
        "why": "Adding rather than concatenating keeps the width at d_model = {d_model}; training learns to keep "
               "meaning and position in directions that interfere little.",
        "numbers": "{formula}: for {tok} (position {pos_no}), dimension 0 is {emb} + {pe} = {total}.",
    },
    "input.types": {
        "what": "Token, position and token-type (segment) vectors are added element by element: {n_pos} × {d_model} "
                "numbers. The token-type table is a departure from the paper, used by BERT to tell sentence A "
                "from sentence B.",
        "numbers": "{formula}: for {tok} (position {pos_no}), dimension 0 is {emb} + {pe} + {typ} = {total}.",
    },
    "input.none": {
        "what": "Nothing is added to the token vectors here (no positional encoding, a departure from the paper): the "
                "{n_pos} × {d_model} embeddings go into the first layer as they are.",
        "why": "This model brings in position elsewhere (T5: a relative position bias inside attention), so the "
               "input carries only what each token is, not where it stands.",
        "numbers": "{formula}: for {tok} (position {pos_no}), dimension 0 is {emb}, unchanged.",
    },
    "input.rotary": {
        "what": "Nothing is added to the token vectors here (rotary positions, a departure from the paper): the "
                "{n_pos} × {d_model} embeddings go into the first layer as they are.",
        "why": "This model brings in position inside every attention instead, by turning each query and key through "
               "an angle that grows with its position (RoPE), so the input carries only what each token is.",
        "numbers": "{formula}: for {tok} (position {pos_no}), dimension 0 is {emb}, unchanged.",
    },
    "input.plain": {"numbers": "{formula}: the sum has std {std} and ranges from {min} to {max}."},
    # ---------------------------------------------------------------- attention
    "qkv": {
        "what": "One matrix product gives every position its query, key and value at once: X ({n_pos} × {d_model}) "
                "times [W^Q W^K W^V] ({d_model} × {d_out}) is {n_pos} × {d_out}.",
        "why": "Q, K and V are three learned views of the same tokens: the query says what a position looks for, the "
               "key what it offers, the value what it passes on when chosen. Fusing the three matrices is only "
               "faster, not different.",
        "numbers": "{d_out} = 3 × {d_attn}: columns 1–{d_attn} are Q, {d_model_1}–{d_model_2} are K and the last "
                   "{d_attn} are V.",
    },
    "qkv.grouped": {
        "numbers": "{d_out} = {d_attn} + 2 × {d_kv_attn}: columns 1–{d_attn} are Q ({h} heads), {k_from}–{k_to} are "
                   "K and the last {d_kv_attn} are V ({h_kv} {heads_word} each: grouped-query attention).",
    },
    "qkv.cross_q": {
        "what": "Queries come from the decoder: W^Q ({d_model} × {d_attn}) turns the vector of each target position "
                "into a query ({side_positions} here).",
        "why": "In cross-attention the decoder asks the questions: each target position forms a query for what it "
               "needs from the source.",
        "numbers": "({n_pos} × {d_model}) · ({d_model} × {d_attn}){plus_b} → {n_pos} × {d_attn}, one query per target "
                   "position.",
    },
    "qkv.cross_kv": {
        "what": "Keys and values come from the encoder output: [W^K W^V] ({d_model} × {d_out}) turns the vector of "
                "each source position into a key and a value ({side_positions} here).",
        "why": "Every decoder layer reads the same encoder output but projects it with its own weights. The source "
               "does not change while decoding, so these are computed once and cached.",
        "numbers": "({n_pos} × {d_model}) · ({d_model} × {d_out}){plus_b} → {n_pos} × {d_out}: the first {d_attn} "
                   "columns are K, the last {d_attn} are V.",
    },
    "heads": {
        "what": "The {d_attn} columns are cut into h = {h} slices of d_k = {d_k}, one per head: {shape}.",
        "why": "Each head attends on its own in a smaller space, so different heads can follow different relations; "
               "together they cost about as much as one full-width head.",
        "numbers": "{d_attn} = {h} × {d_k}: head 1 takes columns 1–{d_k}, head {h} columns {last_from}–{d_attn}.",
    },
    "heads.q": {
        "what": "The queries are cut into h = {h} heads of d_k = {d_k} numbers each ({side_positions} per "
                "head): {shape}.",
    },
    "heads.k": {
        "what": "The keys are cut into h = {h} heads of d_k = {d_k} numbers each ({side_positions} per "
                "head): {shape}.",
    },
    "heads.v": {
        "what": "The values are cut into h = {h} heads of d_v = {d_k} numbers each ({side_positions} per "
                "head): {shape}.",
        "why": "Each head will average its own slice of the values, so the heads can carry different information "
               "about the same token.",
    },
    "scores": {
        "what": "For each of the {h} heads, every query is compared with every key by a dot product. Here "
                "{qk_from}, so each head has a {n_q} × {n_k} map.",
        "why": "A dot product is large when two vectors point the same way; the learned W^Q and W^K decide, "
               "separately in each head, which queries and keys count as a match.",
        "numbers": "Each score adds up d_k = {d_k} products. In head 1, row 1 ({q_first}) against column 1 "
                   "({k_first}) scores {s00}; this head's scores range from {head_min} to {head_max} (std "
                   "{head_std}).",
    },
    "scaled_scores": {
        "what": "Every score of the {h} heads' {n_q} × {n_k} maps is divided by √d_k = √{d_k} = {sqrt_dk:.2f}.",
        "why": "A dot product of d_k terms grows with d_k (for unit-variance inputs its variance is d_k); large "
               "scores push the softmax towards a one-hot output whose gradients vanish. Dividing by √d_k cancels "
               "that growth, so the softmax saturates no sooner in a wide head than in a narrow one.",
        "numbers": "d_k = {d_k} (d_model / h = {d_model} / {h}), so every score is divided by √{d_k} = {sqrt_dk:.2f}; "
                   "the scores' standard deviation went from {std_before} to {std_after}.",
    },
    "scaled_scores.none": {
        "what": "The scores are not divided by √d_k here, a departure from the paper: the {h} heads' {n_q} × {n_k} "
                "maps pass on unchanged (T5).",
        "why": "The paper divides by √d_k so that wide heads do not saturate the softmax. T5 gets the same effect "
               "from its initialisation instead: W^Q starts out √d_k times smaller than W^K, so the dot products "
               "begin at a moderate size and no division is needed at run time.",
        "numbers": "d_k = {d_k}, so the paper would divide every score by √{d_k} = {sqrt_dk:.2f}; here the scores "
                   "keep their standard deviation of {std}.",
    },
    "scaled_scores.custom": {
        "what": "Every score of the {h} heads' {n_q} × {n_k} maps is divided by √s = √{s} = {sqrt_s:.2f}, a number "
                "the model sets (Gemma's query_pre_attn_scalar), instead of the paper's √d_k = √{d_k}.",
        "why": "The paper divides by √d_k so that wide heads do not saturate the softmax. Gemma 2 and 3 choose the "
               "divisor themselves, so the scores' scale is tied to a fixed s rather than to each head's width.",
        "numbers": "Every score is divided by √{s} = {sqrt_s:.2f} (√d_k would be {sqrt_dk:.2f}); the scores' "
                   "standard deviation went from {std_before} to {std_after}.",
    },
    "scaled_scores.plain": {
        "numbers": "d_k = {d_k} (d_model / h = {d_model} / {h}), so every score is divided by √{d_k} = "
                   "{sqrt_dk:.2f}; the scaled scores have standard deviation {std}.",
    },
    "position_bias": {
        "what": "T5's relative position bias: for query position i and key position j, the distance j − i falls into "
                "one of {n_buckets} buckets, and each of the {h} heads has learned one number per bucket. This "
                "{n_q} × {n_k} map per head is computed once, here in the first layer, and added to the scores of "
                "every layer of the {stack}.",
        "why": "This is how T5 knows word order (it adds no positional encoding to its inputs): each head can learn to "
               "favour, say, the previous token or nearby tokens. {direction} Short distances get a bucket each "
               "(0 to {max_exact_1}); longer ones share logarithmically wider buckets, and every distance of "
               "{max_distance} or more shares the last one, so the bias works for texts of any length.",
        "numbers": "In head 1, {q_last} (position {n_q}) gets {self_bias} for itself{left_clause}{right_clause}. "
                   "Over all heads the bias ranges from {min} to {max}.",
    },
    "position_bias.shared": {
        "what": "The same relative position bias as in the first layer of the {stack}: T5 computes the map once per "
                "stack and every layer adds it to its scores ({h} heads, {n_q} × {n_k} each).",
        "why": "Sharing keeps the number of position parameters tiny ({n_buckets} per head for the whole stack) and "
               "gives every layer the same sense of distance; each layer's own W^Q and W^K decide how much it "
               "matters against the content of the tokens. {direction}",
    },
    "position_bias.plain": {"numbers": "The bias ranges from {min} to {max} over the {h} heads."},
    "mask": {
        "what": "The mask M, a {n_q} × {n_k} grid added to every head's scaled scores, is 0 where a query may look "
                "and −∞ where it may not.",
        "why": "The softmax raises e to each score, and e^−∞ = 0, so a −∞ cell ends with exactly zero weight however "
               "large the other scores are.",
        "numbers": "{n_blocked} of the {n_cells} cells are −∞ and {n_allowed} are 0{b_note}.",
    },
    "mask.padding": {
        "why": "Padding only fills shorter sentences up to the batch's length and means nothing, so no query may "
               "read it; e^−∞ = 0 gives those keys zero weight.",
        "numbers": "{n_pad_keys} padding position(s) are blocked in every row: {n_blocked} of the {n_cells} cells are "
                   "−∞ and {n_allowed} are 0{b_note}.",
    },
    "mask.causal": {
        "what": "The causal mask, a {n_q} × {n_k} grid added to every head's scaled scores: 0 on and below the "
                "diagonal, −∞ above it, so position t may look only at positions 1 … t.",
        "why": "In training the decoder reads the whole target at once; without this mask a position could simply "
               "copy the token it has to predict. Blocking later positions makes training match generation, where "
               "those tokens do not exist yet.",
        "numbers": "{n_blocked} of the {n_cells} cells are −∞{pad_clause} and {n_allowed} are 0: row 1 ({q_first}) "
                   "sees {first_seen} of the {n_k} positions and row {n_q} ({q_last}) sees {last_seen}. Since "
                   "e^−∞ = 0, blocked cells get weight exactly 0.",
    },
    "mask.none": {
        "what": "The mask M ({n_q} × {n_k}) adds −∞ where a query may not look, but here every cell is 0: "
                "{no_mask_reason}.",
        "why": "Adding 0 changes nothing, so the scores reach the softmax unchanged; a −∞ cell would have become "
               "e^−∞ = 0 weight.",
        "numbers": "0 of the {n_cells} cells are −∞; all {n_allowed} are 0{b_note}.",
    },
    "masked_scores": {
        "what": "The mask is added to the scaled scores: allowed cells keep their value and blocked cells become −∞, "
                "in all {h} heads ({n_q} × {n_k} each).",
        "why": "The softmax comes next, and e^−∞ = 0, so a blocked key gets exactly zero weight while the allowed "
               "keys share all of it.",
        "numbers": "{n_blocked} of the {n_cells} cells of each head are −∞; the finite scores range from {min} to "
                   "{max}.",
    },
    "masked_scores.bias": {
        "what": "The relative position bias B and the mask M are added to the scores: allowed cells become S + B, "
                "blocked cells −∞, in all {h} heads ({n_q} × {n_k} each).",
        "why": "The bias lets the positions of query and key shift the scores before the softmax, and e^−∞ = 0 gives "
               "each blocked key exactly zero weight while the allowed keys share all of it.",
        "numbers": "{n_blocked} of the {n_cells} cells of each head are −∞; the finite values range from {min} to "
                   "{max}.",
    },
    "masked_scores.bias_none": {
        "what": "The relative position bias B is added to the scores, and the mask, all zeros in this {attention}, "
                "changes nothing: S + B in all {h} heads ({n_q} × {n_k} each).",
        "why": "The bias lets the positions of query and key shift the scores before the softmax. No mask is needed: "
               "{no_mask_reason}.",
        "numbers": "No cell is −∞; the values range from {min} to {max}.",
    },
    "masked_scores.none": {
        "what": "The mask is added to the scaled scores; in this {attention} it is all zeros, so the {h} heads' "
                "{n_q} × {n_k} maps pass through unchanged.",
        "why": "Nothing needs hiding here: {no_mask_reason}.",
        "numbers": "No cell is −∞; the scores still range from {min} to {max}.",
    },
    "attention_weights": {
        "what": "Softmax turns each row of the scores into weights that are positive and sum to 1. Here {qk_from}, "
                "hence the {n_q} × {n_k} map in each of the {h} heads.",
        "why": "The weights say how much each query position takes from each key position; in self-attention every "
               "source token gathers context from the whole sentence, itself included.",
        "numbers": "Each row sums to 1. In head 1 the last row ({q_last}) puts its largest weight, {w_max}, on "
                   "{k_top} (position {k_pos}); its smallest weight is {w_min}.",
    },
    "attention_weights.masked": {
        "why": "Each target position may gather only from itself and earlier positions: the masked cells got "
               "weight exactly 0, because the model must not see the future.",
        "numbers": "Each row sums to 1, and the {n_zero} masked cells per head are exactly 0. In head 1 the last row "
                   "({q_last}) puts its largest weight, {w_max}, on {k_top} (position {k_pos}).",
    },
    "attention_weights.cross": {
        "why": "This is where the decoder reads the source: each target position chooses which source tokens to take "
               "information from. In a translation model these maps often line up with word alignments.",
    },
    "context": {
        "what": "Each head replaces every query position by a weighted average of the value vectors, using that "
                "row's attention weights: ({n_q} × {n_k}) · ({n_k} × {d_k}) = {n_q} × {d_k} per head.",
        "why": "This is how attention moves information: a position collects what the positions it attends to "
               "carry, in proportion to the weights.",
        "numbers": "In head 1, row {n_q} ({q_last}) gives weight {w_top} to {k_top}, so its output leans towards "
                   "that token's value vector: in dimension 1 the output is {ctx} and that value is {v_top}.",
    },
    "concat": {
        "what": "The {h} head outputs of d_v = {d_k} numbers are placed side by side again: one vector of {d_attn} "
                "numbers for {each_position}.",
        "why": "This undoes the split into heads; the model needs one vector per position again before the output "
               "projection mixes what the heads found.",
        "numbers": "{h} × {d_k} = {d_attn}: columns 1–{d_k} come from head 1, columns {last_from}–{d_attn} from "
                   "head {h}.",
    },
    "projection": {
        "what": "The joined heads are multiplied by W^O ({d_attn} × {d_model}), giving one {d_model}-number vector "
                "for {each_position}.",
        "why": "Concatenation only stacks the heads side by side; W^O lets every output number combine all heads and "
               "maps the result back into the coordinates of x, ready to be added to it.",
        "numbers": "({n_pos} × {d_attn}) · ({d_attn} × {d_model}){plus_b} → {n_pos} × {d_model}; {wo_b} hold{s_bring} "
                   "{proj_params} weights. The output has std {std}.",
    },
    "dropout": {
        "what": "During training each value is set to 0 with probability p = {p}, and the others are multiplied by "
                "1/(1 − p) = {keep_scale}.",
        "why": "Randomly silencing values stops the network from leaning on any single one, which reduces "
               "overfitting; the rescaling keeps the expected value unchanged. When the model is used (not "
               "trained), dropout does nothing.",
        "numbers": "{zero_pct} of the {n_values} values are 0 after it (p = {p} expected).",
    },
    # ---------------------------------------------------------------- Add & Norm
    "residual": {
        "what": "The sublayer's output is added back to its own input: x + Sublayer(x), for "
                "{each_position} ({n_pos} × {d_model}).",
        "why": "This shortcut lets the input and the gradients flow straight past the sublayer, which then only has "
               "to learn a correction to x; that is what lets deep stacks of layers train.",
        "numbers": "For {tok} (position 1), dimension 1: x = {x0} plus Sublayer(x) = {s0} gives {r0}. The std is "
                   "{sd_x} for x, {sd_s} for the sublayer's output and {sd_r} for the sum.",
    },
    "residual.pre": {
        "what": "Pre-LN (a departure from the paper, as in GPT-2 and T5): the sublayer read {norm_name}(x), and its "
                "output is added back to x itself, for {each_position} ({n_pos} × {d_model}). No {norm_name} "
                "follows: this sum is the layer's running output.",
        "why": "The shortcut passes x through untouched, so the residual stream is never normalised inside the "
               "layers; putting the norm before each sublayer is what lets very deep stacks train without warm-up. "
               "A final {norm_name} after the stack brings the vectors back to a steady scale.",
    },
    "residual.sandwich": {
        "what": "Sandwich norms (Gemma 2 and 3, a departure from the paper): the sublayer read {norm_name}(x), its "
                "output went through a second {norm_name} of its own, and that is added back to x itself, for "
                "{each_position} ({n_pos} × {d_model}).",
        "why": "The norm after the sublayer brings what it adds to a steady size, so no sublayer can swamp the "
               "residual stream; the norm before it keeps its input steady, and x flows past both untouched.",
    },
    "residual.post_only": {
        "what": "Post-norm only (OLMo 2, a departure from the paper): the sublayer read x itself, with no norm "
                "before it; its output was normalised by {norm_name}, and that is added back to x, for "
                "{each_position} ({n_pos} × {d_model}). The sum is not normalised: it is the layer's running "
                "output.",
        "why": "The paper normalises the sum, {norm_name}(x + Sublayer(x)); here only what the sublayer adds is "
               "normalised, so every correction arrives at a steady size while x, and the gradients, flow past "
               "untouched. A final {norm_name} after the stack steadies the stream for the output layer.",
    },
    "residual.parallel": {
        "what": "Parallel attention and feed-forward (GPT-J, GPT-NeoX/Pythia; a departure from the paper): both "
                "sublayers read the same x, each through its own {norm_name}, and both outputs are added to x at "
                "once, x + Attention({norm_name}₁(x)) + FFN({norm_name}₂(x)), for {each_position} ({n_pos} × "
                "{d_model}).",
        "why": "Neither sublayer waits for the other, so the two can run side by side; the model gives up the "
               "feed-forward seeing what attention just gathered in this layer (it sees it in the next).",
        "numbers": "For {tok} (position 1), dimension 1: x = {x0} plus both sublayers' outputs, {s0} together, "
                   "gives {r0}. The std is {sd_x} for x, {sd_s} for what the two added and {sd_r} for the sum.",
    },
    "residual.plain": {"numbers": "The sum has std {std} and ranges from {min} to {max}."},
    "layer_norm": {
        "what": "LayerNorm rescales the vector of {each_position} on its own: subtract the vector's mean over "
                "its {d_model} numbers, divide by its standard deviation, then apply a learned scale γ and shift β.",
        "why": "Adding sublayer outputs to x again and again would let the vectors' size drift from layer to layer; "
               "normalising every sum keeps them at a steady scale, which keeps training stable. The statistics "
               "come from one token's own features, not from the batch as in BatchNorm, so they do not depend on "
               "batch size, padding or the other sentences.",
        "numbers": "For {tok} (position 1): mean {mu_in} and std {sd_in} before, mean {mu_out} and std {sd_out} "
                   "after. Over {all_positions} the average std goes from {avg_sd_in} to {avg_sd_out} "
                   "(ε = {eps:g}; the learned γ and β can move it away from 1).",
    },
    "layer_norm.embed": {
        "what": "The embedding sum is normalised before the first layer: the vector of {each_position} gets "
                "mean 0 and std 1 over its {d_model} numbers, then a learned scale γ and shift β. A departure from the "
                "paper, made by BERT.",
        "why": "Vectors of different scales are summed here; normalising hands the first layer inputs of a steady "
               "size, like the output of every later Add & Norm. Statistics are per token, so batch size and "
               "padding do not matter.",
    },
    "layer_norm.final": {
        "what": "One more LayerNorm after the last {stack} layer, applied to the vector of {each_position}: a "
                "departure from the paper's model (torch.nn.Transformer adds it by default).",
        "why": "It hands the {consumer} inputs of a fixed scale; in pre-norm models, whose residual stream is never "
               "normalised inside the layers, it is essential.",
    },
    "layer_norm.pre": {
        "what": "Pre-LN (a departure from the paper, as in GPT-2): the vector of {each_position} is normalised "
                "before the sublayer reads it — mean 0 and std 1 over its {d_model} numbers, then a learned scale γ "
                "and shift β. The residual connection around the sublayer keeps the un-normalised x.",
        "why": "The paper normalises after adding (LayerNorm(x + Sublayer(x))); normalising the sublayer's input "
               "instead, x + Sublayer(LayerNorm(x)), gives every sublayer inputs of a steady size while the "
               "gradients flow straight along the residual stream, which makes deep models easier to train.",
    },
    "layer_norm.rms": {
        "what": "RMSNorm rescales the vector of {each_position} on its own: divide it by its root mean square "
                "√(mean(x²) + ε) over its {d_model} numbers, then apply a learned scale γ. Unlike LayerNorm it "
                "subtracts no mean and adds no shift β (a departure from the paper, as in T5).",
        "why": "Keeping the vectors' size steady is what makes training stable; re-centring them turned out to add "
               "little, so RMSNorm drops it and is cheaper. Statistics are per token, so batch size and padding do "
               "not matter.",
        "numbers": "For {tok} (position 1): root mean square {rms_in} before and {rms_out} after; its mean is "
                   "{mu_out}, not 0, since nothing is centred. Over {all_positions} the average root mean square "
                   "goes from {avg_rms_in} to {avg_rms_out} (ε = {eps:g}; the learned γ can move it away from 1).",
    },
    "layer_norm.rms_pre": {
        "what": "Pre-LN with RMSNorm (departures from the paper, as in T5): the vector of {each_position} is divided "
                "by its root mean square √(mean(x²) + ε) over its {d_model} numbers and scaled by a learned γ before "
                "the sublayer reads it; no mean is subtracted and there is no shift β. The residual connection keeps "
                "the un-normalised x.",
        "why": "Normalising the sublayer's input instead of the sum, x + Sublayer(RMSNorm(x)), gives every sublayer "
               "inputs of a steady size while the gradients flow straight along the residual stream. RMSNorm keeps "
               "LayerNorm's rescaling but drops its re-centring, which matters little and costs time.",
        "numbers": "For {tok} (position 1): root mean square {rms_in} before and {rms_out} after; its mean is "
                   "{mu_out}, not 0, since nothing is centred. Over {all_positions} the average root mean square "
                   "goes from {avg_rms_in} to {avg_rms_out} (ε = {eps:g}; the learned γ can move it away from 1).",
    },
    "layer_norm.rms_post": {
        "what": "Post-norm (the second half of Gemma 2 and 3's sandwich, a departure from the paper): the sublayer's "
                "output for {each_position} is divided by its root mean square √(mean(x²) + ε) over its {d_model} "
                "numbers and scaled by a learned γ before it is added to the residual stream.",
        "why": "However large a sublayer's output grows, what it adds to x arrives at a steady size, so no layer "
               "can drown out the ones before it; with the norm before the sublayer too, each sublayer sits between "
               "two norms.",
        "numbers": "For {tok} (position 1): root mean square {rms_in} before and {rms_out} after. Over "
                   "{all_positions} the average root mean square goes from {avg_rms_in} to {avg_rms_out} "
                   "(ε = {eps:g}; the learned γ can move it away from 1).",
    },
    "layer_norm.rms_post_only": {
        "what": "Post-norm (OLMo 2, a departure from the paper): the sublayer's output for {each_position} is "
                "divided by its root mean square √(mean(x²) + ε) over its {d_model} numbers and scaled by a learned γ "
                "before it is added to the residual stream. It is the only norm around this sublayer, whose input "
                "was not normalised.",
        "why": "Normalising what a sublayer adds, rather than the sum (the paper) or the sublayer's input (pre-LN), "
               "keeps every correction at a steady size however large the raw output grows, while the residual "
               "stream itself is never rescaled inside the layers.",
        "numbers": "For {tok} (position 1): root mean square {rms_in} before and {rms_out} after. Over "
                   "{all_positions} the average root mean square goes from {avg_rms_in} to {avg_rms_out} "
                   "(ε = {eps:g}; the learned γ can move it away from 1).",
    },
    "layer_norm.rms_final": {
        "what": "One more RMSNorm after the last {stack} layer, applied to the vector of {each_position}: divided by "
                "its root mean square and scaled by a learned γ (no mean subtracted, no β). Not in the paper's model.",
        "why": "It hands the {consumer} inputs of a fixed scale; in pre-norm models, whose residual stream is never "
               "normalised inside the layers, it is essential.",
        "numbers": "For {tok} (position 1): root mean square {rms_in} before and {rms_out} after; its mean is "
                   "{mu_out}, not 0, since nothing is centred. Over {all_positions} the average root mean square "
                   "goes from {avg_rms_in} to {avg_rms_out} (ε = {eps:g}; the learned γ can move it away from 1).",
    },
    "layer_norm.plain": {
        "numbers": "After it, {tok} (position 1) has mean {mu_out} and std {sd_out}; the learned γ and β can move "
                   "them away from 0 and 1.",
    },
    # ---------------------------------------------------------------- feed-forward
    "ffn_hidden": {
        "what": "Each position's vector is widened from d_model = {d_model} to d_ff = {d_ff} numbers by {w1_b1}, "
                "then ReLU, max(0, ·), sets every negative value to 0.",
        "why": "Without a nonlinearity the two layers would collapse into one matrix; ReLU makes each hidden unit a "
               "switch that passes its input or stays silent, so the network can compute far more than a linear "
               "map.",
        "numbers": "{zero_pct} of the {n_hidden} hidden values ({n_pos} × {d_ff}) are exactly 0; the largest "
                   "is {max}.",
    },
    "ffn_hidden.gelu": {
        "what": "Each position's vector is widened from d_model = {d_model} to d_ff = {d_ff} numbers by {w1_b1}, "
                "then GELU, x·Φ(x) with Φ the normal CDF: a departure from the paper's ReLU, as in BERT.",
        "why": "Like ReLU it passes large positive values and suppresses negative ones, but smoothly, so small "
               "negative inputs keep a little signal and a gradient.",
        "numbers": "{neg_pct} of the {n_hidden} hidden values ({n_pos} × {d_ff}) are negative, but none below "
                   "{min} (GELU never goes under about −0.17); the largest is {max}.",
    },
    "ffn_hidden.gelu_tanh": {
        "what": "Each position's vector is widened from d_model = {d_model} to d_ff = {d_ff} numbers by {w1_b1}, "
                "then GELU in its tanh approximation: a departure from the paper's ReLU.",
        "why": "Like ReLU it passes large positive values and suppresses negative ones, but smoothly; the tanh form "
               "is a cheaper curve that is almost identical to exact GELU.",
        "numbers": "{neg_pct} of the {n_hidden} hidden values ({n_pos} × {d_ff}) are negative, but none below "
                   "{min} (GELU never goes under about −0.17); the largest is {max}.",
    },
    "ffn_hidden.silu": {
        "what": "Each position's vector is widened from d_model = {d_model} to d_ff = {d_ff} numbers by {w1_b1}, "
                "then SiLU, x·σ(x) (Marian's \"swish\"): a departure from the paper's ReLU.",
        "why": "Like ReLU it passes large positive values and suppresses negative ones, but smoothly, so small "
               "negative inputs keep a little signal and a gradient.",
        "numbers": "{neg_pct} of the {n_hidden} hidden values ({n_pos} × {d_ff}) are negative, but none below "
                   "{min} (SiLU never goes under about −0.28); the largest is {max}.",
    },
    "ffn_gate": {
        "what": "The gate branch of the gated feed-forward unit: W_1 widens each position's vector from d_model = "
                "{d_model} to d_ff = {d_ff} numbers, then {act_name} is applied.",
        "why": "A gated unit (Shazeer 2020; T5 v1.1 and Flan-T5 use GELU) has two branches instead of one: this one, "
               "through the non-linearity, decides how much of each hidden unit passes; the linear branch next "
               "supplies what passes. It trains better than the paper's single ReLU layer at the same cost.",
        "numbers": "{neg_pct} of the {n_hidden} gate values ({n_pos} × {d_ff}) are negative and {zero_pct} are "
                   "exactly 0; they range from {min} to {max}.",
    },
    "ffn_gate.linear": {
        "what": "The linear branch of the gated feed-forward unit: a second matrix V widens each position's vector "
                "from d_model = {d_model} to d_ff = {d_ff} numbers, with no activation at all.",
        "why": "Multiplied element by element with the gate, it lets signed values through in proportion to how "
               "open the gate is, instead of the all-or-nothing of a ReLU; V is the third matrix a gated unit adds.",
        "numbers": "The {n_hidden} values ({n_pos} × {d_ff}) range from {min} to {max} (std {std}); {neg_pct} are "
                   "negative.",
    },
    "ffn_hidden.gated": {
        "what": "The two branches are multiplied element by element: {act_short}(x W_1) ⊙ (x V), {n_pos} × {d_ff} "
                "numbers, the hidden layer of the gated unit (a departure from the paper's ReLU layer).",
        "why": "Where the gate is near 0 the hidden unit is silent; where it is open the linear branch's value passes, "
               "sign included. The product is then brought back to d_model by W_2.",
        "numbers": "{neg_pct} of the {n_hidden} hidden values are negative and {small_pct} are within ±0.01 of 0; "
                   "the largest is {max}.",
    },
    "ffn_out": {
        "what": "W_2 ({d_ff} × {d_model}){and_b2} bring{s_bring} each hidden vector back to d_model = {d_model}. The "
                "same two-layer network is applied to {each_position} independently.",
        "why": "Attention moves information between positions; the feed-forward network then transforms each "
               "position on its own. It holds {ffn_share} of this layer's weights.",
        "numbers": "({n_pos} × {d_ff}) · ({d_ff} × {d_model}){plus_b2} → {n_pos} × {d_model}. {ffn_parts} hold "
                   "{ffn_formula} = {ffn_params} weights, shared by all positions.",
    },
    # ---------------------------------------------------------------- output
    "mask.causal@text": {
        "why": "The model reads the whole text at once; without this mask a position could simply copy the token it "
               "has to predict. Blocking later positions makes training match writing, where those tokens do not "
               "exist yet.",
    },
    "logits@text": {
        "why": "A higher score means more likely, but scores are not probabilities yet. When the output layer is "
               "the embedding table reused (tied weights, as in GPT-2), a token scores high when the last vector "
               "points the way of that token's embedding.",
    },
    "probabilities@text": {
        "what": "Softmax turns each position's {vocab} scores into probabilities for the next token: row t, which has "
                "read the text up to token t, predicts token t+1.",
    },
    "logits": {
        "what": "The decoder's output vectors are multiplied by a {d_model} × {vocab} matrix: for "
                "{each_position}, one score for every token of the {vocab}-token vocabulary.",
        "why": "A higher score means more likely, but scores are not probabilities yet. The matrix is the target "
               "embedding table reused (tied weights, as in the paper), so a token scores high when the decoder's "
               "vector points the way of that token's embedding.",
        "numbers": "At the last position ({tok}, position {n_pos}) the highest score is {top_logit}, for {top_tok}; "
                   "that row ranges from {row_min} to {row_max}.",
    },
    "logits.untied": {
        "why": "A higher score means more likely, but scores are not probabilities yet. This model has its own "
               "output matrix instead of reusing the embedding table as the paper does.",
    },
    "output_scale": {
        "what": "The decoder's output vectors are multiplied by d_model^-0.5 = 1/√{d_model} = {inv_sqrt_dm:.4f} before "
                "the output layer (T5 v1.0, a departure from the paper).",
        "why": "T5's output layer is its embedding table, whose rows are large (about std 1 per number); without "
               "this factor the logits would be √d_model times too large. It is the mirror image of the paper's "
               "×√d_model on the embeddings.",
        "numbers": "The std goes from {std_before} to {std_after}.",
    },
    "output_scale.plain": {"numbers": "After scaling the vectors have std {std}."},
    "probabilities": {
        "what": "Softmax turns each position's {vocab} scores into probabilities for the next token: row t, which has "
                "read the decoder input up to token t, predicts token t+1.",
        "why": "Probabilities can be compared with the true next token (the cross-entropy loss in training) or used "
               "to choose a token when generating; every row sums to 1.",
        "numbers": "The last row ({tok}, position {n_pos}) predicts {top_tok} with p = {top_p}{first_clause}.",
    },
    # ---------------------------------------------------------------- today's decoders
    "heads.k.shared": {
        "what": "The keys are cut into h_kv = {h_kv} {heads_word} of d_k = {d_k} numbers each ({side_positions} per "
                "head): {shape}. Each key head serves {group} query heads ({sharing}).",
        "why": "Query heads of one group compare themselves with the same keys but still make maps of their own. "
               "W^K and W^V are {group}× narrower than W^Q, and the KV cache a generating model keeps holds "
               "{cache_token} per token over its {n_layers} layers instead of {cache_token_full} with one key head "
               "per query head.",
        "numbers": "{d_kv_attn} = {h_kv} × {d_k}: {spread_k}.",
    },
    "heads.v.shared": {
        "what": "The values are cut into h_kv = {h_kv} {heads_word} of d_v = {d_k} numbers each ({side_positions} per "
                "head): {shape}. Each value head serves {group} query heads ({sharing}).",
        "why": "Every query head of a group averages the same value vectors, each with its own weights; sharing is "
               "what keeps the KV cache at {cache_token} per token instead of {cache_token_full}.",
        "numbers": "{d_kv_attn} = {h_kv} × {d_k}: {spread_v}.",
    },
    "rotary": {
        "what": "The {which} are turned by position (rotary positions, RoPE): in every head, dimension i and its "
                "partner i + {half} are rotated together through the angle pos · θ^(−2i/{d_rot}), θ = {theta}."
                "{rot_clause}",
        "why": "This is where the model learns word order: the 2017 paper adds a position vector to the input once, "
               "while RoPE (Su et al. 2021) turns queries and keys inside every attention. A rotation keeps a "
               "vector's length, and turning q by position m and k by position n leaves q·k depending on m − n "
               "only, so a score sees how far apart two tokens are, not where they stand.",
        "numbers": "The fastest pair turns {fast} rad per position (a full turn every {fast_period} positions), "
                   "the slowest {slow} (one turn in {slow_period} positions). At {tok}, head 1's vector is "
                   "{len_before} long before and {len_after} after: turned, not stretched.",
    },
    "qk_norm": {
        "what": "QK-norm: the {which} go through RMSNorm before the scores, {over}, divided by its root mean square "
                "and multiplied by a learned γ of {width} numbers.",
        "why": "With q and k of bounded length no dot product can grow without limit, so the softmax cannot "
               "collapse onto one key while training (Qwen3, OLMo 2 and Gemma 3 do this; the 2017 paper does not).",
        "numbers": "At {tok}, head 1's vector was {len_before} long and is {len_after} after the norm; the "
                   "{n_vectors} normalised vectors range in length from {min_len} to {max_len}.",
    },
    # ---------------------------------------------------------------- an attached sparse dictionary
    "features": {
        "what": "The {kind}'s {width} features at {read}: each is {formula_words}. Most are 0 at any token; the "
                "few that are not say what the dictionary reads there.",
        "why": "One neuron of a model rarely means one thing: models store more features than they have dimensions "
               "(superposition). A sparse dictionary, trained on the model's own activations, writes each token's "
               "vector as a handful of features that each stand for one thing, so they can be read, and clamped.",
        "numbers": "At {tok}, {n_active} of {width} features are active; the strongest is feature {top_f} ({top_v})"
                   ". Over this run a token has {mean_active} active features on average.",
    },
    "features.pre": {
        "what": "The {kind}'s pre-activations at {read}: every feature's encoder column read against the token's "
                "vector, pre = {pre_formula}, {width} numbers per token.",
        "why": "Each feature's encoder column is the direction it looks for; the larger the pre-activation, the more "
               "of that direction the token's vector holds. The next step keeps only the strongest.",
        "numbers": "At {tok} the pre-activations run from {min} to {max}; feature {top_f} is the largest ({top_v}).",
    },
    "reconstruction": {
        "what": "The {kind}'s reconstruction of {target}: x̂ = f W_dec + b_dec, each active feature's decoder row "
                "times its value, summed, plus a bias.",
        "why": "If the few active features carry what the model uses, their decoder rows add up to nearly the "
               "model's own vector; what they miss is the error, the next step.",
        "numbers": "At {tok} the reconstruction is {len_recon} long against {len_target} for {target} itself "
                   "({share} of its variance over this run is explained).",
    },
    "reconstruction.error": {
        "what": "The {kind}'s error at {target}: what the features miss, y − x̂. The model's own pass carries on "
                "with y = x̂ + error, unchanged.",
        "why": "A dictionary is an approximation; the error term keeps the run exact, and an attribution graph keeps "
               "it as one node per token, so nothing is silently dropped.",
        "numbers": "At {tok} the error is {len_error} long, {err_share} of {target}'s own length ({len_target}).",
    },
    # ---------------------------------------------------------------- mixture of experts
    "router": {
        "what": "The router scores every expert for each token: the token's vector times W_router ({d_model} × "
                "{n_experts}, no bias), one number per expert.",
        "why": "This layer has {n_experts} feed-forward networks (experts) instead of the paper's one, and each token "
               "runs through only {top_k} of them; these scores are how the router, learned with the rest, decides "
               "which.",
        "numbers": "For {tok}, expert {top_e} scores highest ({top_logit}) and expert {low_e} lowest ({low_logit}); "
                   "all scores lie between {min} and {max}{b_note}.",
    },
    "router.weights": {
        "what": "Softmax turns each token's {n_experts} router scores into probabilities over the experts, "
                "p = softmax(x W_router): one row per token, adding up to 1.",
        "why": "Only the {top_k} most probable experts will run for a token, and their probabilities say how much "
               "each one's output counts in the sum.",
        "numbers": "{tok} gives its highest probability, {top_p}, to expert {top_e}; expert {busy_e} is the "
                   "first choice of the most tokens ({busy_n}).",
    },
    "router.chosen": {
        "what": "Each token keeps its {top_k} most probable experts and their probabilities, {renorm}; the other "
                "experts get 0 and do not run for it. Row by row, this is the map of where each token went.",
        "why": "Running {top_k} of {n_experts} experts gives the layer {all_params} expert weights while each token "
               "uses only {active_params} of them ({top_k} × {expert_params}): more knowledge for the same work "
               "per token, which is why today's largest models are mixtures of experts.",
        "numbers": "{tok} goes to experts {experts} with weights {weights} (sum {weight_sum}). Over this text the "
                   "experts got: {loads}.",
    },
    "ffn_out.expert": {
        "what": "The output of each token's {nth} expert, {formula}: a feed-forward of its own, {d_expert} wide, "
                "run only on the tokens that chose it — which expert that is differs from token to token.",
        "why": "Each expert has its own W_1, V and W_2 ({expert_params} weights); which tokens go where is learned, "
               "so experts come to handle different kinds of tokens and text.",
        "numbers": "For {tok} this is expert {e}, with weight {w}; its output vector is {len_out} long. Counting each "
                   "token's {nth} expert: {counts}.",
    },
    "ffn_out.moe": {
        "what": "The sublayer's output is the weighted sum of each token's {top_k} chosen experts' outputs, "
                "MoE(x) = Σ_j w_j · FFN_(e_j)(x), with the weights of the router's chosen map.",
        "why": "In place of the paper's one feed-forward: each position is still transformed on its own, but by the "
               "few experts the router picked for it, mixed by how much the router trusts each.",
        "numbers": "For {tok}: {sum_expr}; its first number is {first_expr} = {out0}.",
    },
    "softcap": {
        "what": "Soft-capping (Gemma 2, a departure from the paper): every scaled score s of the {h} heads' "
                "{n_q} × {n_k} maps becomes {cap}·tanh(s / {cap}), squeezed into (−{cap}, {cap}) before the mask "
                "is added.",
        "why": "Near 0, c·tanh(s / c) ≈ s, so ordinary scores pass almost unchanged, while a score racing towards "
               "a huge value is held below c. The softmax then cannot pour a whole row's weight onto one key just "
               "because one score grew without bound, which keeps training stable.",
        "numbers": "In head 1 the largest score, {max_before}, became {max_after}, and the smallest, {min_before}, "
                   "became {min_after}.",
    },
    "softcap.logits": {
        "what": "Soft-capping of the logits (Gemma 2 and 3, a departure from the paper): every score l of the "
                "{vocab}-token vocabulary, for {each_position}, becomes {cap}·tanh(l / {cap}), squeezed into "
                "(−{cap}, {cap}) before the softmax.",
        "why": "Small logits pass nearly unchanged while large ones are held below c, so no token's probability "
               "can run off towards 1 on one huge logit. The tokens keep their order; only how sure the model is "
               "changes.",
        "numbers": "At the last position ({tok}) the highest logit, {max_before} for {top_tok}, became "
                   "{max_after}; the lowest, {min_before}, became {min_after}.",
    },
    # ---------------------------------------------------------------- anything else
    "step": {
        "what": "This step computes {formula}, a tensor of shape {shape}.",
        "why": "It is one of the operations inside {block}.",
        "numbers": "Its values range from {min} to {max} (mean {mean}, std {std}){b_note}.",
    },
}

# Pieces of sentences that numbers.py fills in and passes as placeholder values.
PHRASES: dict[str, str] = {
    "rotary.q": "queries",
    "spread.one": "the one {what} head is read by all {h} query heads",
    "spread.groups": "{what} head 1 takes columns 1–{d_k} and is read by query heads 1–{group}; {what} head {h_kv} "
                     "takes columns {kv_last_from}–{d_kv_attn}, read by query heads {last_group_from}–{h}",
    "sharing.one": "multi-query attention",
    "sharing.groups": "grouped-query attention",
    "rotary.k": "keys",
    "rotary.partial": " Only the first {d_rot} of each head's {d_k} dimensions turn; the rest pass unchanged.",
    "qk_norm.head": "each head's vector on its own",
    "qk_norm.full": "all heads' numbers at a position together, as one vector",
    "side.src_pos": "source",
    "side.tgt_pos": "target",
    "count.token": "{n} token",
    "count.tokens": "{n} tokens",
    "count.position": "{n} position",
    "count.positions": "{n} positions",
    "count.src_pos": "{n} source position",
    "count.src_poss": "{n} source positions",
    "count.tgt_pos": "{n} target position",
    "count.tgt_poss": "{n} target positions",
    "side.text": "text",  # a decoder-only model's one input (Ctx.noun)
    "count.text": "{n} position",
    "count.texts": "{n} positions",
    "from.decoder.self_attn@text": "queries, keys and values all come from the text read so far ({q_positions})",
    "each.one": "the single position",
    "each.many": "each of the {n} positions",
    "all.one": "the single position",
    "all.many": "all {n} positions",
    "from.encoder.self_attn": "queries, keys and values all come from the source ({q_positions})",
    "from.decoder.self_attn": "queries, keys and values all come from the decoder's input ({q_positions})",
    "from.decoder.cross_attn": "queries come from the decoder ({q_positions}), keys and values from the "
                               "encoder output ({k_positions})",
    "attention.encoder.self_attn": "encoder self-attention",
    "attention.decoder.self_attn": "masked decoder self-attention",
    "attention.decoder.cross_attn": "cross-attention",
    "no_mask.encoder.self_attn": "the source has no padding, and encoder self-attention lets every source position "
                                 "see every other",
    "no_mask.decoder.cross_attn": "the source has no padding, and every target position may read the whole source",
    "no_mask.decoder.self_attn": "the only query is the newest position, which may see everything before it",
    "no_mask.other": "nothing is padded or hidden in this attention",
    "pad_clause": " ({n_causal} above the diagonal, {n_pad_cells} for padding)",
    "first_clause": "; row 1 ({first}) predicts {first_top} with p = {first_p}",
    "dims_pair": "dimensions {a} and {b}",
    "dim_one": "dimension {a}",
    "token": "'{text}'",
    "token_unknown": "token {n}",
    "token_id": "id {id}",
    "special.eos": "the end token (id {id})",
    "special.bos": "the start token (id {id})",
    "special.pad": "the padding token (id {id})",
    "ids_more": ", … ({n} ids)",
    "b_note": ", in batch item {n} of {total}",
    "consumer.encoder": "decoder's cross-attention",
    "consumer.decoder": "output layer",
    "consumer.other": "next step",
    "stack.encoder": "encoder",
    "stack.decoder": "decoder",
    "norm.layernorm": "LayerNorm",
    "norm.rmsnorm": "RMSNorm",
    "act.relu": "ReLU",
    "act.gelu": "GELU",
    "act.gelu_tanh": "GELU (tanh approximation)",
    "act.silu": "SiLU",
    "act_short.relu": "ReLU",
    "act_short.gelu": "GELU",
    "act_short.gelu_tanh": "GELU",
    "act_short.silu": "SiLU",
    "direction.bidirectional": "In the encoder the buckets also tell left from right: half of them are for keys "
                               "after the query.",
    "direction.causal": "In the decoder a query never sees later keys, so all the buckets go to looking back.",
    "left_clause": ", {left} for the key one step to its left",
    "right_clause": "; {q_prev} gets {right} for the key one step to its right",
    "ffn_parts.bias": "W_1, b_1, W_2, b_2",
    "ffn_parts.plain": "W_1 and W_2",
    "ffn_parts.gated": "W_1, V and W_2",
    "ffn_parts.gated_bias": "W_1, V, W_2 and their biases",
    "expert_load": "expert {e}: {n}",
    "experts_more": " and {n} more",
    "moe.renormalised": "divided by their sum so they add up to 1",
    "moe.kept": "as they are, so they add up to less than 1",
    "moe.nth": "{n}-choice",
    "moe.weighted": "{w} × expert {e}'s output",
}

# One sentence each for the paper departures that have no step of their own; appended to "what".
NOTES: dict[str, str] = {
    "no_scale": "This model skips the paper's ×√d_model scaling of the embeddings (scale_embedding off), as BERT "
                "does.",
    "shared": "The source and target sides share this one table (paper §3.4).",
    "tied": "The output layer reuses this table to score the next token.",
    "logits_bias": "A learned bias is then added to every score (Marian's final_logits_bias, a departure from the "
                   "paper).",
    "positional_none": "This model adds no positional encoding (positional = none, a departure from the paper).",
    "output_scale": "The decoder output was multiplied by d_model^-0.5 first (T5 v1.0).",
    "plus_one": "This model's RMSNorm multiplies by (1 + γ) rather than γ (Gemma): the stored γ is an offset from 1, "
                "0 at the start of training, and the product is taken in float32.",
    "capped_logits": "The softmax reads these logits after soft-capping (the next step).",
}

# The short text of a link from a step to an earlier one it uses.
LINKS: dict[str, str] = {
    "tokens": "the token ids looked up here",
    "lookup": "the embeddings before scaling",
    "embedded": "the token embeddings",
    "positions": "the positional encoding",
    "sum": "the sum normalised here",
    "x": "the input x of this sublayer",
    "sublayer": "the sublayer output added here",
    "residual": "the residual sum normalised here",
    "memory": "the encoder output that cross-attention reads",
    "qkv": "the projection these heads are cut from",
    "q": "the queries",
    "k": "the keys",
    "v": "the values V this sum weighs",
    "scores": "the raw dot products before scaling",
    "scaled": "the scaled scores the mask is added to",
    "mask": "the mask that is added",
    "masked": "the masked scores this softmax reads",
    "weights": "the attention weights used here",
    "context": "the head outputs joined here",
    "concat": "the joined heads",
    "hidden": "the hidden layer projected back here",
    "dropped": "the values dropout acts on",
    "before": "the vectors before this LayerNorm",
    "before_rms": "the vectors before this RMSNorm",
    "uncapped": "the values before soft-capping",
    "capped": "the soft-capped scores the mask is added to",
    "logits": "the scores this softmax reads",
    "decoder_out": "the decoder output scored here",
    "table": "the embedding table reused as the output matrix",
    "bias": "the relative position bias added here",
    "unscaled": "the scores this bias is added to",
    "bias_first": "the first layer's relative position bias, shared by this layer",
    "unrotated": "the vectors before the rotation",
    "unnormed": "the vectors before QK-norm",
    "gate": "the gate branch",
    "linear": "the linear branch",
    "scaled_out": "the decoder output before scaling",
    "router_logits": "the router's scores",
    "router_probs": "the router's probabilities",
    "chosen": "which experts each token went to, and their weights",
    "choice": "a chosen expert's output, weighted here",
}

# Headings of the plain-text form, Explanation.text().
HEADINGS: dict[str, str] = {
    "why": "Why: {text}",
    "numbers": "In this run: {text}",
    "see": "See step {n} ({name}): {text}",
}
