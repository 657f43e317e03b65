"""all-MiniLM-L6-v2 (sentence-transformers) forward pass in pure numpy.

BertModel (6 layers, hidden 384, 12 heads, exact-erf GELU, LayerNorm eps 1e-12)
-> mean pooling over the attention mask -> L2 normalisation, i.e. the module
stack in modules.json (Transformer, Pooling(mean), Normalize).
Tokenisation: the bundled tokenizer.json (BERT uncased WordPiece), truncation to
max_seq_length=256 from sentence_bert_config.json, padding to the longest
sequence in the batch (padding does not change the result: it is masked out).
"""
import json
import os

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer


def _erf(x):
    # Abramowitz & Stegun 7.1.26 (abs. error <= 1.5e-7, below float32 noise of the
    # network), evaluated in float64. numpy has no erf and scipy is not allowed here.
    x64 = x.astype(np.float64)
    s = np.sign(x64)
    a = np.abs(x64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return (s * y).astype(np.float32)


def gelu(x):
    # HF "gelu" = exact erf GELU
    return 0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class MiniLM:
    def __init__(self, model_dir):
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        st = json.load(open(os.path.join(model_dir, "sentence_bert_config.json")))
        pool = json.load(open(os.path.join(model_dir, "1_Pooling", "config.json")))
        mods = json.load(open(os.path.join(model_dir, "modules.json")))
        assert cfg["hidden_act"] == "gelu" and cfg["position_embedding_type"] == "absolute"
        assert pool["pooling_mode_mean_tokens"] and not pool["pooling_mode_cls_token"]
        self.normalize = any(m["type"].endswith("Normalize") for m in mods)
        self.H = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.L = cfg["num_hidden_layers"]
        self.eps = np.float32(cfg["layer_norm_eps"])
        self.max_len = st["max_seq_length"]
        self.w = load_file(os.path.join(model_dir, "model.safetensors"))
        # pre-transpose linear weights (torch Linear stores [out, in])
        for k in list(self.w):
            if k.endswith(".weight") and self.w[k].ndim == 2 and k.startswith("encoder."):
                self.w[k] = np.ascontiguousarray(self.w[k].T)
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(self.max_len)

    def _forward(self, ids, mask):
        w, H, nh = self.w, self.H, self.nh
        hd = H // nh
        B, T = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:T][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        bias = ((1.0 - mask[:, None, None, :].astype(np.float32)) * np.finfo(np.float32).min)
        scale = np.float32(1.0 / np.sqrt(hd))
        for i in range(self.L):
            p = f"encoder.layer.{i}."
            def lin(h, n):
                return h @ w[p + n + ".weight"] + w[p + n + ".bias"]
            q = lin(x, "attention.self.query").reshape(B, T, nh, hd).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(B, T, nh, hd).transpose(0, 2, 3, 1)
            v = lin(x, "attention.self.value").reshape(B, T, nh, hd).transpose(0, 2, 1, 3)
            s = (q @ k) * scale + bias
            s = s - s.max(-1, keepdims=True)
            e = np.exp(s)
            a = e / e.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
            x = layer_norm(lin(ctx, "attention.output.dense") + x,
                           w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], self.eps)
            h = gelu(lin(x, "intermediate.dense"))
            x = layer_norm(lin(h, "output.dense") + x,
                           w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        m = mask[:, :, None].astype(np.float32)
        emb = (x * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        if self.normalize:
            emb = emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)
        return emb

    def encode(self, texts, batch_size=32):
        encs = self.tok.encode_batch(list(texts))
        order = np.argsort([len(e.ids) for e in encs])  # length-sorted batches, like ST
        out = np.zeros((len(texts), self.H), dtype=np.float32)
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            T = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), T), dtype=np.int64)
            mask = np.zeros((len(idx), T), dtype=np.int64)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
            out[idx] = self._forward(ids, mask)
        return out
