"""What a run's own code does (issue 38), carried through the job spec and the command line.

``Job(..., loss=, tp_vocab=, no_sync_grads=)`` prices its memory with them and is checked when made, as
``training_memory`` checks them; ``plan(job)`` refuses a job whose option its search cannot honour;
``llmsizing memory --loss / --tp-vocab / --no-sync-grads`` asks the same as the library.

The expected bytes are counted by hand from the models' config.json files and the bytes per logit that
``footprint.LOSS_KINDS`` and ``LOSS_BACKWARD_BYTES_PER_LOGIT`` document (not read from them here):

- the default loss, ``F.cross_entropy(logits.float())`` run eagerly, keeps the fp32 log-probabilities from the
  forward (4 B per logit) and its backward allocates ``log_softmax``'s fp32 gradient and ``nll_loss``'s
  (8 B per logit, measured in ``data/step_measurements.csv``): 12 B per logit at the loss's backward;
- torchtitan's compiled loss (its PR #1033) saves the bf16 logits (2 B) and writes one bf16 gradient (2 B):
  4 B, so the loss's backward holds 8 B per logit less, ``8 x batch x seq x vocab / tp``;
- the eager loss on bf16 logits (KempnerForge) keeps 4 B and allocates 2 + 2 B: 4 B per logit less.

GPT-2 (124M): hidden 768, vocabulary 50,257, tied embedding. TinyLlama 1.1B: hidden 2048, 22 layers, 32 query
heads and 4 KV heads of 64, MLP 5632, vocabulary 32,000, untied head.
"""

import inspect
import json

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.job import CODE_OPTION_DEFAULTS, Job
from llmsizing.planner import plan

GPT2_VOCAB = 50257
TL_HIDDEN, TL_KV, TL_FFN, TL_VOCAB, TL_LAYERS = 2048, 4 * 64, 5632, 32000, 22
TL_PER_LAYER = 2 * TL_HIDDEN * TL_HIDDEN + 2 * TL_HIDDEN * TL_KV + 3 * TL_HIDDEN * TL_FFN + 2 * TL_HIDDEN
N_TL = TL_LAYERS * TL_PER_LAYER + 2 * TL_VOCAB * TL_HIDDEN + TL_HIDDEN    # + embedding, head, final norm
BATCH, SEQ = 4, 1024


def test_hand_counts_are_the_catalogue():
    assert N_TL == 1_100_048_384 == L.get_model("tinyllama-1.1b").n_params
    assert L.get_model("gpt2").vocab == GPT2_VOCAB and L.get_model("gpt2").tied_embeddings


def test_the_defaults_are_training_memorys_and_the_jobs():
    sig = inspect.signature(L.training_memory.__wrapped__).parameters
    fields = Job.__dataclass_fields__
    for name, default in CODE_OPTION_DEFAULTS.items():
        assert sig[name].default == default == fields[name].default, name
    assert CODE_OPTION_DEFAULTS == {"loss": "fp32", "tp_vocab": "split", "no_sync_grads": "none"}


# ----------------------------------------------------------------------------- the job spec
@pytest.mark.parametrize("tp", [1, 2])
def test_a_job_with_the_compiled_loss_holds_8_bytes_a_logit_less(tp):
    par = L.Parallel(tp=tp)
    job = Job("gpt2", "H100 SXM", SEQ, par, micro_batch=BATCH, loss="compiled")
    on, off = L.training_memory(job), L.training_memory(job.replace(loss="fp32"))
    assert on.peak_phase == off.peak_phase == "loss backward"
    assert off.peak_bytes - on.peak_bytes == 8 * BATCH * SEQ * GPT2_VOCAB / tp       # 1,646,821,376 B at tp=1
    bf16 = L.training_memory(job.replace(loss="bf16"))
    assert off.peak_bytes - bf16.peak_bytes == 4 * BATCH * SEQ * GPT2_VOCAB / tp
    # the job is the keyword call
    direct = L.training_memory("gpt2", batch=BATCH, seq=SEQ, parallel=par, loss="compiled")
    assert on.total_bytes == direct.total_bytes


def test_a_job_with_fsdp2_no_sync_holds_every_gradient_unsharded():
    """ZeRO-3 over 4, 2 micro-batches: the second one's loss backward holds the first one's gradients. By
    default they are sharded, bf16 (2 N / 4); with the sync off FSDP2 keeps them unsharded in its reduce
    dtype (4 N in fp32, 2 N in bf16)."""
    job = Job("tinyllama-1.1b", "H100 SXM", 2048, L.Parallel(dp=4, zero=3), grad_accum=2)
    off = L.training_memory(job).phases_bytes["loss backward"]
    for dtype, size in (("fp32", 4), ("bf16", 2)):
        on = L.training_memory(job.replace(no_sync_grads=dtype)).phases_bytes["loss backward"]
        assert on - off == size * N_TL - 2 * N_TL / 4, dtype


def test_old_jobs_pass_the_same_keywords():
    job = Job("gpt2", "H100 SXM", SEQ)
    for kind in ("memory", "step", "time", "plan"):
        assert not set(CODE_OPTION_DEFAULTS) & set(job.kwargs(kind)), kind
    on = job.replace(loss="compiled")
    assert on.kwargs("memory")["loss"] == "compiled"
    assert "loss" not in on.kwargs("step") and "loss" not in on.kwargs("time")          # no memory there


def test_step_and_time_of_a_job_hold_no_memory_and_do_not_move():
    job = Job("gpt2", "H100 SXM", SEQ, L.Parallel(dp=8, zero=3), micro_batch=BATCH, grad_accum=2)
    other = job.replace(loss="compiled", no_sync_grads="fp32")
    assert L.step_time(other).step_s == L.step_time(job).step_s
    assert L.training_time(other, tokens=1e9).days == L.training_time(job, tokens=1e9).days


@pytest.mark.parametrize("kw, err, match", [
    (dict(loss="fp16"), ValueError, "unknown loss 'fp16'|Allowed: fp32, bf16, compiled"),
    (dict(tp_vocab="whole"), ValueError, "unknown tp_vocab 'whole'|Allowed: split, replicated"),
    (dict(no_sync_grads="fp16"), ValueError, "unknown no_sync_grads 'fp16'|Allowed: none, fp32, bf16"),
    (dict(loss=None), TypeError, "loss must be a string"),
    (dict(no_sync_grads=True), TypeError, "no_sync_grads must be a string"),
    (dict(model="gpt2", tp_vocab="replicated"), ValueError,
     "tp_vocab='replicated' is priced for a dense model with an untied LM head"),
    (dict(parallel=L.Parallel(pp=2), grad_accum=2, no_sync_grads="fp32"), ValueError,
     "no_sync_grads='fp32' is priced without a pipeline, got pp=2"),
    (dict(parallel=L.Parallel(dp=4, zero=1), grad_buffer=True, no_sync_grads="bf16"), ValueError,
     "no_sync_grads='bf16' is FSDP2's"),
])
def test_a_bad_option_is_refused_when_the_job_is_made(kw, err, match):
    """(``match``: the parts of the message, split at ``|``.)"""
    kw = {"model": "tinyllama-1.1b", **kw}
    with pytest.raises(err) as e:
        Job(gpu="H100 SXM", seq=SEQ, **kw)
    assert all(part in str(e.value) for part in match.split("|")), e.value
    if "loss" in kw:                                          # and when an option is changed: checked again
        with pytest.raises(err, match="loss"):
            Job("gpt2", "H100 SXM", SEQ).replace(loss=kw["loss"])


@pytest.mark.parametrize("option", [dict(loss="compiled"), dict(loss="bf16"), dict(no_sync_grads="fp32"),
                                    dict(tp_vocab="replicated")])
def test_plan_of_a_job_with_an_option_its_search_cannot_honour_is_refused(option):
    job = Job("tinyllama-1.1b", "H100 SXM", SEQ, L.Parallel(dp=8, zero=3), grad_accum=2, **option)
    (name, value), = option.items()
    refusal = rf"plan\(job\) of a job with {name}='{value}': the planner's search"
    with pytest.raises(ValueError, match=refusal):
        plan(job, tokens=1e9)
    with pytest.raises(ValueError, match="training_memory"):
        job.kwargs("plan")
    assert "loss" not in job.replace(**CODE_OPTION_DEFAULTS).kwargs("plan")              # the defaults plan


# ----------------------------------------------------------------------------- the command line
def _json(capsys, argv):
    assert cli.main(argv) == 0
    return {r["component"]: r["bytes"] for r in json.loads(capsys.readouterr().out)}


_GPT2 = ["memory", "gpt2", "--batch", str(BATCH), "--seq", str(SEQ)]


@pytest.mark.parametrize("tp", [1, 2])
def test_memory_loss_compiled_prints_a_peak_8_bytes_a_logit_lower(tp, capsys):
    argv = _GPT2 + ["--tp", str(tp)]
    off, on = _json(capsys, argv + ["--json"]), _json(capsys, argv + ["--loss", "compiled", "--json"])
    assert off["peak"] - on["peak"] == 8 * BATCH * SEQ * GPT2_VOCAB / tp
    bf16 = _json(capsys, argv + ["--loss", "bf16", "--json"])
    assert off["peak"] - bf16["peak"] == 4 * BATCH * SEQ * GPT2_VOCAB / tp
    lib = L.training_memory("gpt2", batch=BATCH, seq=SEQ, parallel=L.Parallel(tp=tp), loss="compiled")
    assert on["total"] == lib.total_bytes
    assert cli.main(argv + ["--loss", "compiled"]) == 0
    text = capsys.readouterr().out
    assert "; --loss compiled; alive at the peak of the step (the loss backward)" in text
    assert cli.main(argv + ["--loss", "fp32", "--tp-vocab", "split", "--no-sync-grads", "none"]) == 0
    given = capsys.readouterr().out                                     # the defaults, given: as without them
    assert cli.main(argv) == 0
    assert given == capsys.readouterr().out and "--loss" not in given


def test_memory_tp_vocab_replicated_holds_the_whole_vocabulary(capsys):
    """TP=2, the loss backward (no gradient yet): each rank holds the other half of the embedding's weights
    (2 B) and AdamW's fp32 master and moments (12 B), and of the logits' 4 + 8 B."""
    argv = ["memory", "tinyllama-1.1b", "--batch", "4", "--seq", "2048", "--tp", "2", "--json"]
    off, on = _json(capsys, argv), _json(capsys, argv + ["--tp-vocab", "replicated"])
    assert on["peak"] - off["peak"] == (2 + 12) * TL_VOCAB * TL_HIDDEN / 2 + (4 + 8) * 4 * 2048 * TL_VOCAB / 2


@pytest.mark.parametrize("dtype, size", [("fp32", 4), ("bf16", 2)])
def test_memory_no_sync_grads_is_the_unsharded_gradient(dtype, size, capsys):
    argv = ["memory", "tinyllama-1.1b", "--batch", "1", "--seq", "2048", "--dp", "4", "--zero", "3",
            "--grad-accum", "2", "--json"]
    off, on = _json(capsys, argv), _json(capsys, argv + ["--no-sync-grads", dtype])
    assert on["peak"] - off["peak"] == size * N_TL - 2 * N_TL / 4


@pytest.mark.parametrize("argv, match", [
    (["gpt2", "--tp-vocab", "replicated", "--tp", "2", "--loss", "compiled"],
     "error: --tp-vocab replicated: tp_vocab='replicated' is priced for a dense model"),
    (["tinyllama-1.1b", "--no-sync-grads", "fp32", "--pp", "2", "--grad-accum", "2"],
     "error: --no-sync-grads fp32: no_sync_grads='fp32' is priced without a pipeline"),
    (["tinyllama-1.1b", "--no-sync-grads", "bf16", "--dp", "2", "--grad-buffer"],
     "error: --no-sync-grads bf16: no_sync_grads='bf16' is FSDP2's"),
    (["gpt2", "--loss", "fp16"], "--loss: invalid choice: 'fp16'"),
])
def test_memory_refuses_what_the_library_refuses_naming_the_flag(argv, match, capsys):
    try:
        rc = cli.main(["memory", *argv, "--batch", "1", "--seq", "1024"])
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
