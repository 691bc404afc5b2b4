"""BERT-base and GPT-2 (small) as plain torch modules, for export_models.py (Debian has no transformers).

The module structure follows HuggingFace transformers' BertModel and GPT2Model (v4.x, modeling_bert.py and
modeling_gpt2.py) closely enough that torch.onnx.export emits the same ONNX patterns:
  BERT: word + position + token_type embeddings -> LayerNorm(eps 1e-12); 12 post-LN layers of
        MHA (Q/K/V Linear, view+permute heads, matmul(q, k^T) / sqrt(64) + extended additive mask
        (1 - attention_mask) * finfo.min, softmax, matmul(p, v)) + GELU(erf) MLP; tanh pooler on token 0.
  GPT-2: token + position embeddings; 12 pre-LN blocks of Conv1D-style (x @ W[in, out] + b via addmm)
        fused c_attn split into q/k/v, matmul(q, k^T) / sqrt(64), where(tril bias, w, finfo.min), softmax,
        matmul(p, v), c_proj; MLP with gelu_new (tanh approximation written out); final LayerNorm.
Weights are random (seeded); Q/K projections get a larger init than HF's 0.02 so attention is peaked
rather than uniform (a test that would hide softmax/mask mistakes otherwise).
"""
import math

import torch
from torch import nn

D_MODEL, N_HEADS, N_LAYERS, D_FF = 768, 12, 12, 3072


def _init_linear(lin, std):
    nn.init.normal_(lin.weight, 0.0, std)
    nn.init.normal_(lin.bias, 0.0, 0.02)


def _init_layernorm(ln, gen_std=0.1):
    with torch.no_grad():
        ln.weight.copy_(1.0 + gen_std * torch.randn_like(ln.weight))
        ln.bias.copy_(gen_std * torch.randn_like(ln.bias))


class BertSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = D_MODEL // N_HEADS
        self.query, self.key, self.value = nn.Linear(D_MODEL, D_MODEL), nn.Linear(D_MODEL, D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        for lin in (self.query, self.key):
            _init_linear(lin, 1.5 / math.sqrt(D_MODEL))
        _init_linear(self.value, 1.0 / math.sqrt(D_MODEL))

    def transpose_for_scores(self, x):
        return x.view(x.size()[:-1] + (N_HEADS, self.head)).permute(0, 2, 1, 3)

    def forward(self, hidden, ext_mask):
        q = self.transpose_for_scores(self.query(hidden))
        k = self.transpose_for_scores(self.key(hidden))
        v = self.transpose_for_scores(self.value(hidden))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head)
        probs = nn.functional.softmax(scores + ext_mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (D_MODEL,))


class BertLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = BertSelfAttention()
        self.attn_out, self.attn_ln = nn.Linear(D_MODEL, D_MODEL), nn.LayerNorm(D_MODEL, eps=1e-12)
        self.intermediate, self.output = nn.Linear(D_MODEL, D_FF), nn.Linear(D_FF, D_MODEL)
        self.out_ln = nn.LayerNorm(D_MODEL, eps=1e-12)
        for lin in (self.attn_out, self.output):
            _init_linear(lin, 1.0 / math.sqrt(lin.in_features))
        _init_linear(self.intermediate, 1.0 / math.sqrt(D_MODEL))
        _init_layernorm(self.attn_ln)
        _init_layernorm(self.out_ln)

    def forward(self, hidden, ext_mask):
        a = self.attn_ln(self.attn_out(self.attention(hidden, ext_mask)) + hidden)
        h = nn.functional.gelu(self.intermediate(a))  # erf form, as HF's "gelu"
        return self.out_ln(self.output(h) + a)


class BertModel(nn.Module):
    def __init__(self, vocab=30522, max_pos=512, type_vocab=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, D_MODEL)
        self.position_embeddings = nn.Embedding(max_pos, D_MODEL)
        self.token_type_embeddings = nn.Embedding(type_vocab, D_MODEL)
        self.emb_ln = nn.LayerNorm(D_MODEL, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, max_pos), dtype=torch.long))
        self.layers = nn.ModuleList(BertLayer() for _ in range(N_LAYERS))
        self.pooler = nn.Linear(D_MODEL, D_MODEL)
        _init_layernorm(self.emb_ln)
        for e in (self.word_embeddings, self.position_embeddings, self.token_type_embeddings):
            nn.init.normal_(e.weight, 0.0, 0.5)
        _init_linear(self.pooler, 1.0 / math.sqrt(D_MODEL))

    def forward(self, input_ids, attention_mask):
        seq = input_ids.size(1)
        tt = self.token_type_ids[:, :seq].expand(input_ids.size(0), seq)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(tt) + \
            self.position_embeddings(self.position_ids[:, :seq])
        x = self.emb_ln(x)
        ext = attention_mask[:, None, None, :].to(x.dtype)
        ext = (1.0 - ext) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, ext)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


class Conv1D(nn.Module):
    """HF's GPT-2 Conv1D: a Linear with the weight stored [in, out], computed with addmm."""

    def __init__(self, nf, nx, std):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.randn(nx, nf) * std)
        self.bias = nn.Parameter(torch.randn(nf) * 0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, max_pos):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((max_pos, max_pos), dtype=torch.bool)).view(
            1, 1, max_pos, max_pos))
        self.c_attn = Conv1D(3 * D_MODEL, D_MODEL, 1.5 / math.sqrt(D_MODEL))
        self.c_proj = Conv1D(D_MODEL, D_MODEL, 1.0 / math.sqrt(D_MODEL * 2 * N_LAYERS))
        self.head = D_MODEL // N_HEADS

    def split_heads(self, x):
        return x.view(x.size()[:-1] + (N_HEADS, self.head)).permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(D_MODEL, dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        ql, kl = q.size(-2), k.size(-2)
        causal = self.bias[:, :, kl - ql:kl, :kl]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = torch.where(causal, w.to(w.dtype), mask_value)
        w = nn.functional.softmax(w, dim=-1)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        return self.c_proj(a.view(a.size()[:-2] + (D_MODEL,)))


class GPT2Block(nn.Module):
    def __init__(self, max_pos):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(D_MODEL, eps=1e-5), nn.LayerNorm(D_MODEL, eps=1e-5)
        self.attn = GPT2Attention(max_pos)
        self.c_fc = Conv1D(D_FF, D_MODEL, 1.0 / math.sqrt(D_MODEL))
        self.mlp_proj = Conv1D(D_MODEL, D_FF, 1.0 / math.sqrt(D_FF * 2 * N_LAYERS))
        _init_layernorm(self.ln_1)
        _init_layernorm(self.ln_2)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x))))


class GPT2Model(nn.Module):
    def __init__(self, vocab=50257, max_pos=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, D_MODEL), nn.Embedding(max_pos, D_MODEL)
        nn.init.normal_(self.wte.weight, 0.0, 0.5)
        nn.init.normal_(self.wpe.weight, 0.0, 0.1)
        self.h = nn.ModuleList(GPT2Block(max_pos) for _ in range(N_LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL, eps=1e-5)
        _init_layernorm(self.ln_f)

    def forward(self, input_ids):
        seq = input_ids.size(-1)
        pos = torch.arange(0, seq, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


# name -> (constructor, input names, output names, vocab size)
TEXT_MODELS = {
    "bert_base": (BertModel, ("input_ids", "attention_mask"), ("last_hidden_state", "pooler_output"), 30522),
    "gpt2": (GPT2Model, ("input_ids",), ("last_hidden_state",), 50257),
}


def build_text_model(name, seed):
    torch.manual_seed(seed)
    model = TEXT_MODELS[name][0]()
    model.eval()
    return model


def sample_inputs(name, batch, seq, seed):
    """Seeded token ids (and, for BERT, a padding mask whose last rows end early) as int64 arrays."""
    gen = torch.Generator().manual_seed(seed)
    vocab = TEXT_MODELS[name][3]
    feeds = {"input_ids": torch.randint(0, vocab, (batch, seq), generator=gen)}
    if "attention_mask" in TEXT_MODELS[name][1]:
        mask = torch.ones(batch, seq, dtype=torch.long)
        for b in range(1, batch):
            mask[b, seq - 16 * b:] = 0  # padded tail: masked keys
        feeds["attention_mask"] = mask
    return {k: v.numpy() for k, v in feeds.items()}


def export_text_onnx(model, name, path, opset, batch=1, seq=128):
    _, in_names, out_names, _ = TEXT_MODELS[name]
    dummy = tuple(torch.from_numpy(v) for v in sample_inputs(name, batch, seq, 0).values())
    axes = {n: {0: "batch", 1: "seq"} for n in in_names}
    axes.update({n: {0: "batch"} for n in out_names})
    axes[out_names[0]] = {0: "batch", 1: "seq"}
    import inspect
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, dummy, path, opset_version=opset, input_names=list(in_names),
                      output_names=list(out_names), dynamic_axes=axes, do_constant_folding=True, **extra)
