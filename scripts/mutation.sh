#!/usr/bin/env bash
# Mutation testing of the model core's numerics with mutmut: each module is broken one small change at a time
# (an operator, a constant, an argument) and its focused tests are run against every broken copy; a "survivor" is
# a change no test noticed. Slow (minutes per module), so it is not part of scripts/test.sh; docs/mutation-testing.md
# has the last scores and explains every survivor.
#
#   bash scripts/mutation.sh                      # every module below
#   bash scripts/mutation.sh masks attention      # some of them
#   JOBS=2 bash scripts/mutation.sh masks         # more workers (default 1)
#   MUTATION_DIR=/tmp/m bash scripts/mutation.sh  # where the copies are made (default /tmp/scratchformer-mutation)
#   MUTANTS='scratchformer.transformer.attention.x_attention__*' bash scripts/mutation.sh attention
#                                                 # only these mutants (mutmut's names, * matches; several
#                                                 # separated by spaces); the module's copy is refreshed and
#                                                 # its score counts only these (the rest read "not checked")
#
# Each module runs in its own copy of the checkout (mutmut writes a mutants/ folder next to pyproject.toml), so the
# working tree is never touched. Afterwards, in $MUTATION_DIR/<module>: `mutmut results` lists the survivors and
# `mutmut show <name>` prints one as a diff.
set -euo pipefail
# The whole script is one function, read in full before it starts, so editing this file while a run is under way
# cannot change the run (bash otherwise reads a script as it goes).
main() {
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"
MUTMUT="$ROOT/.venv/bin/mutmut"
WORK=${MUTATION_DIR:-/tmp/scratchformer-mutation}
JOBS=${JOBS:-1}
if [ ! -x "$MUTMUT" ]; then
  echo "mutation: mutmut is not installed; run bash scripts/setup.sh (it installs the test extras)."
  exit 2
fi

T=tests/scratchformer
# module → the file it mutates and the fast tests that guard it (each selection runs in seconds, not minutes).
declare -A FILE TESTS
FILE[masks]=scratchformer/transformer/masks.py
TESTS[masks]="$T/test_mask_values.py $T/test_attention_masks.py::test_mask_builders_have_the_documented_shapes_and_values
  $T/test_attention_masks.py::test_fully_masked_row_gives_zeros_not_nan"
FILE[attention]=scratchformer/transformer/attention.py
TESTS[attention]="$T/test_attention_values.py $T/test_embedding_end_to_end.py
  $T/test_reference.py::test_paper_sized_layer_equals_reference $T/test_attention_masks.py::test_fully_masked_row_gives_zeros_not_nan
  $T/test_kv_cache_logits.py $T/test_attention_trace_steps.py $T/test_fast_attention_paths.py
  $T/test_rerun_device_moves.py"
FILE[embeddings]=scratchformer/transformer/embeddings.py
TESTS[embeddings]="$T/test_embedding_values.py $T/test_embedding_tables.py $T/test_embedding_trace_texts.py
  $T/test_embedding_end_to_end.py
  $T/test_embeddings_tokenizer.py::test_positional_encoding_is_the_closed_form"
FILE[layers]=scratchformer/transformer/layers.py
TESTS[layers]="$T/test_layer_values.py $T/test_layer_trace_steps.py
  $T/test_reference.py::test_paper_sized_layer_equals_reference $T/test_gelu_tanh_gpt2.py
  $T/test_embedding_end_to_end.py $T/test_kv_cache_logits.py $T/test_rerun_device_moves.py"
FILE[decoding]=scratchformer/running/decoding.py
TESTS[decoding]="$T/test_decoding.py $T/test_beam_length_penalty.py $T/test_kv_cache_logits.py
  $T/test_decoder_key_knockout.py $T/test_generation.py $T/test_evaluation.py $T/test_beam_search_defaults.py
  $T/test_decoding_source_padding.py $T/test_decoding_timeline.py $T/test_decoding_model_inputs.py
  $T/test_beam_search_mean_ablation.py $T/test_decoding_length_limits.py
  $T/test_beam_search_stopping.py"
FILE[interventions]=scratchformer/patching/interventions.py
TESTS[interventions]="$T/test_intervention_values.py $T/test_interventions.py $T/test_intervention_specs_and_records.py
  $T/test_decoder_key_knockout.py"
FILE[lazy]=scratchformer/recording/lazy.py
TESTS[lazy]="$T/test_lazy_trace.py $T/test_lazy_output_chunks.py $T/test_lazy_parts.py $T/test_rerun_device_moves.py"
FILE[memory]=scratchformer/loading/memory.py
TESTS[memory]="$T/test_memory_budget.py $T/test_memory_estimate_closed_form.py $T/test_memory_estimate_parts.py"
FILE[derive]="scratchformer/analyses/derive/*"
TESTS[derive]="$T/test_derive_numbers.py $T/test_derive.py $T/test_derive_arithmetic.py $T/test_derive_texts.py
  $T/test_cli.py::test_every_command_and_option_says_what_it_does
  $T/test_cli.py::test_the_cli_reference_is_what_the_parser_says"
# several files: separated by spaces (each becomes one only_mutate entry)
FILE[rollout]="scratchformer/analyses/rollout.py scratchformer/analyses/flow.py scratchformer/analyses/mixing.py"
TESTS[rollout]="$T/test_rollout_values.py $T/test_analyses.py::test_rollout_equals_a_hand_computation
  $T/test_analyses.py::test_flow_through_two_layers_is_the_sum_of_path_bottlenecks
  $T/test_analyses.py::test_rollout_covers_the_stacks_each_model_has
  $T/test_cli.py::test_every_command_and_option_says_what_it_does
  $T/test_cli.py::test_the_cli_reference_is_what_the_parser_says"
FILE[lens]="scratchformer/analyses/lens.py scratchformer/analyses/stream.py"
TESTS[lens]="$T/test_lens_values.py $T/test_analyses.py::test_the_lens_last_point_is_the_models_own_output
  $T/test_analyses.py::test_the_lens_reads_each_point_through_the_final_norm_and_output_layer
  $T/test_encoder_lens.py::test_the_lens_reads_every_encoder_point_through_the_head
  $T/test_cli.py::test_every_command_and_option_says_what_it_does
  $T/test_cli.py::test_the_cli_reference_is_what_the_parser_says"
FILE[attribute]=scratchformer/analyses/attribute.py
TESTS[attribute]="$T/test_attribution_values.py $T/test_attribution_reference.py $T/test_rerun_device_moves.py
  $T/test_analyses.py::test_attribution_refuses_in_one_sentence $T/test_analyses.py::test_the_pad_baseline_is_the_model_reading_padding
  $T/test_analyses.py::test_the_command_lines_print_json_of_the_designed_shape
  $T/test_analyses.py::test_the_command_lines_refuse_in_one_sentence
  $T/test_analyses.py::test_a_padded_batch_item_is_attributed_as_the_sentence_alone
  $T/test_analyses.py::test_path_points_run_in_batches_of_at_most_chunk_positions
  $T/test_analyses.py::test_a_cell_holding_a_jump_is_cut_inside_that_cell
  $T/test_analyses.py::test_baselines_that_cannot_be_made_are_refused_in_one_sentence
  $T/test_analyses.py::test_a_bfloat16_model_is_attributed_in_its_own_precision
  $T/test_analyses.py::test_the_python_api_defaults_to_integrated_gradients_from_a_zero_baseline
  $T/test_cli.py::test_every_command_and_option_says_what_it_does
  $T/test_cli.py::test_the_cli_reference_is_what_the_parser_says"
FILE[experiments]="scratchformer/experiments/*"
TESTS[experiments]="$T/test_experiments.py $T/test_experiment_values.py $T/test_teacher_forcing_inputs.py
  $T/test_temperature_experiment.py $T/test_norm_experiment.py $T/test_experiment_tables.py
  $T/test_cli.py::test_the_cli_reference_is_what_the_parser_says"
FILE[head_importance]=scratchformer/patching/head_importance.py
TESTS[head_importance]="$T/test_head_importance_values.py $T/test_rerun_device_moves.py
  $T/test_interventions.py::test_head_importance_ranks_the_guided_head_first_for_cross_attention"
ALL=(masks attention embeddings layers decoding interventions lazy memory derive rollout lens attribute experiments
  head_importance)

modules=("$@")
[ ${#modules[@]} -eq 0 ] && modules=("${ALL[@]}")
mkdir -p "$WORK"
for m in "${modules[@]}"; do
  if [ -z "${FILE[$m]+x}" ]; then
    echo "mutation: no module '$m'; pick from: ${ALL[*]}"
    exit 2
  fi
  dir="$WORK/$m"
  [ -z "${MUTANTS:-}" ] && rm -rf "$dir"
  # mutmut keeps which tests reach which function from the last run and profiles only tests it has not seen, so a
  # test edited since would not be run against the functions it now reaches: profile every test again
  rm -f "$dir/mutants/mutmut-stats.json"
  mkdir -p "$dir"
  # the checkout as it is now (tracked and new files, not ignored ones), without the venv
  git ls-files -z --cached --others --exclude-standard | (cd "$ROOT" && xargs -0 cp --parents -t "$dir" 2>/dev/null || true)
  sel=""
  for t in ${TESTS[$m]}; do
    [ -f "$dir/${t%%::*}" ] && sel+="\"$t\", "  # a file, or one test in it (file::test)
  done
  only=""
  read -ra files <<<"${FILE[$m]}"  # split on spaces, no glob expansion (mutmut reads the globs)
  for f in "${files[@]}"; do only+="\"$f\", "; done
  only=${only%, }
  cat >"$dir/mutmut.toml" <<EOF

[tool.mutmut]
source_paths = ["scratchformer"]
only_mutate = [$only]
also_copy = ["resources", "data", "app", "docs"]
pytest_add_cli_args_test_selection = [${sel%, }]
pytest_add_cli_args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
process_isolation = "forkserver"
# the numbers, not the words: what a trace step is called and how a formula is written for people is left alone
do_not_mutate_patterns = ['^\\s*def (_record|describe|sum_formula|_no_positions|__repr__)\\b', 'tracer\\.add\\(']
EOF
  cat "$dir/mutmut.toml" >>"$dir/pyproject.toml"
  echo "== $m (${FILE[$m]}): ${TESTS[$m]}"
  start=$(date +%s)
  (cd "$dir" && QT_QPA_PLATFORM=offscreen OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
     "$MUTMUT" run --max-children "$JOBS" ${MUTANTS:-} >"$dir/run.log" 2>&1) || echo "mutation: mutmut failed for $m, see $dir/run.log"
  (cd "$dir" && "$MUTMUT" results --all true 2>/dev/null) >"$dir/results.txt" || true
  "$PY" - "$dir/results.txt" "$m" "$(( $(date +%s) - start ))" <<'EOF'
import collections, sys
path, module, seconds = sys.argv[1:]
status = collections.Counter(line.rsplit(": ", 1)[1].strip() for line in open(path, encoding="utf-8") if ": " in line)
killed = status["killed"] + status["timeout"] + status["segfault"]
tried = killed + status["survived"] + status["suspicious"]
score = f"{100 * killed / tried:.0f} %" if tried else "n/a"
print(f"{module}: {killed} of {tried} mutants tried killed ({score}); {status['survived']} survived, "
      f"{status['no tests']} without tests, {status['not checked']} not tried yet; {seconds} s")
EOF
  grep -E ': (survived|no tests|suspicious)$' "$dir/results.txt" || true
done
}
main "$@"; exit  # one line: bash has read `exit` before main runs, whatever an edit does to the file
