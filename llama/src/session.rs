//! One request's run through a model: its key-value cache and the steps of
//! a forward pass, into buffers allocated once.
//!
//! A model of 135M parameters does little work per operation: run through a
//! general tensor library, building, dispatching and allocating each
//! operation's result costs as much as the arithmetic. So this is a fixed
//! sequence of steps into buffers a [`Session`] allocates once, with the
//! weights in their quantized blocks ([`crate::quant`]), matrix products
//! shared out among the threads of one pool, and a key-value cache sized
//! for the request.

use crate::model::Model;
use crate::ops::{self, Attention};
use crate::quant::Inputs;

/// Prompt tokens a caller runs through [`Session::forward`] at once:
/// enough to share each weight row's unpacking into tiles among many
/// tokens (a chunk of 256 rather than 64 took 9% off a 256-token prompt
/// of SmolLM2, 15% off Gemma 3 270M's, 16% off an F16 0.6B's, whose rows
/// are turned to floats once a chunk), few enough that a step's
/// activations stay a few MiB and a caller's deadline is checked often
/// (256 tokens: about a third of a second on the small models).
pub const PROMPT_CHUNK: usize = 256;

/// One request's state: its key-value cache and the buffers of each step.
pub struct Session<'m> {
    model: &'m Model,
    /// Per layer, per position, the keys (then the values) of each kv head.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    /// Positions filled.
    length: usize,
    /// Positions the cache may hold.
    capacity: usize,
    buffers: Buffers,
    logits: Vec<f32>,
}

/// Room for the steps of a forward pass over some tokens, reused.
#[derive(Default)]
struct Buffers {
    residual: Vec<f32>,
    normed: Vec<f32>,
    /// A product's inputs, quantized for its weights.
    inputs: Inputs,
    qkv: Vec<f32>,
    attended: Vec<f32>,
    projected: Vec<f32>,
    gate_up: Vec<f32>,
    activated: Vec<f32>,
    /// Per rotary frequency set, each position's turns.
    rotations: Vec<Vec<(f32, f32)>>,
}

impl<'m> Session<'m> {
    /// A session whose cache holds `capacity` positions.
    pub fn new(model: &'m Model, capacity: usize) -> Self {
        let kv = capacity * model.shape.kv_width();
        Session {
            model,
            keys: (0..model.layers.len())
                .map(|_| Vec::with_capacity(kv))
                .collect(),
            values: (0..model.layers.len())
                .map(|_| Vec::with_capacity(kv))
                .collect(),
            length: 0,
            capacity,
            buffers: Buffers::default(),
            logits: vec![0.0; model.shape.vocabulary],
        }
    }

    /// The scores of each possible next token after the last forward pass.
    pub fn logits(&mut self) -> &mut [f32] {
        &mut self.logits
    }

    /// Runs `tokens` through the model after those before, leaving the
    /// [`logits`](Self::logits) of the token after the last. Its products
    /// are shared among the calling thread and the model's threads, one
    /// per core (concurrent calls take turns, product by product).
    pub fn forward(&mut self, tokens: &[u32]) -> Result<(), String> {
        let model = self.model;
        let shape = &model.shape;
        let family = model.family;
        let count = tokens.len();
        assert!(count > 0, "a forward pass over no tokens");
        if self.length + count > self.capacity {
            return Err(format!(
                "the cache holds {} positions, not {}",
                self.capacity,
                self.length + count
            ));
        }
        if let Some(&token) = tokens
            .iter()
            .find(|&&t| t as usize >= model.embeddings.rows())
        {
            return Err(format!("token {token} is not in the vocabulary"));
        }
        let (width, q_width, kv_width) = (shape.width, shape.q_width(), shape.kv_width());
        let qkv_width = shape.qkv_width();
        let pairs = shape.rotary_dims / 2;
        let b = &mut self.buffers;
        b.residual.resize(count * width, 0.0);
        b.normed.resize(count * width, 0.0);
        b.qkv.resize(count * qkv_width, 0.0);
        b.attended.resize(count * q_width, 0.0);
        b.projected.resize(count * width, 0.0);
        b.gate_up.resize(count * 2 * shape.feed_forward, 0.0);
        b.activated.resize(count * shape.feed_forward, 0.0);
        b.rotations.resize_with(model.rotary.len(), Vec::new);
        for (rotary, out) in model.rotary.iter().zip(&mut b.rotations) {
            ops::rotations(rotary, self.length, count, out);
        }

        for (token, row) in tokens.iter().zip(b.residual.chunks_exact_mut(width)) {
            model.embeddings.dequantize_row(*token as usize, row);
        }
        if family.scaled_embeddings {
            let scale = (width as f32).sqrt();
            b.residual.iter_mut().for_each(|x| *x *= scale);
        }
        for (n, layer) in model.layers.iter().enumerate() {
            // Attention.
            ops::rms_norm(
                &b.residual,
                &layer.attention_norm,
                shape.norm_epsilon,
                &mut b.normed,
            );
            b.inputs.prepare(&b.normed, count, layer.qkv.needs());
            layer.qkv.multiply(&b.inputs, &mut b.qkv);
            let (keys, values) = (&mut self.keys[n], &mut self.values[n]);
            let turns_of = &b.rotations[layer.rotary];
            for (token, qkv) in b.qkv.chunks_exact_mut(qkv_width).enumerate() {
                if let Some(bias) = &layer.qkv_bias {
                    ops::add(qkv, bias);
                }
                let (q, kv) = qkv.split_at_mut(q_width);
                let (k, v) = kv.split_at_mut(kv_width);
                if let (Some(q_norm), Some(k_norm)) = (&layer.q_norm, &layer.k_norm) {
                    ops::rms_norm_rows(q, q_norm, shape.norm_epsilon);
                    ops::rms_norm_rows(k, k_norm, shape.norm_epsilon);
                }
                let turns = &turns_of[token * pairs..][..pairs];
                ops::rotate(q, shape.head_width, shape.rope, turns);
                ops::rotate(k, shape.head_width, shape.rope, turns);
                if family.scales_queries {
                    q.iter_mut().for_each(|x| *x *= shape.attention_scale);
                }
                keys.extend_from_slice(k);
                values.extend_from_slice(v);
            }
            let attention = Attention {
                heads: shape.heads,
                kv_heads: shape.kv_heads,
                head_width: shape.head_width,
                qkv_width,
                scale: match family.scales_queries {
                    true => 1.0,
                    false => shape.attention_scale,
                },
                cap: shape.attention_cap,
                window: layer.window,
            };
            ops::attend(
                &attention,
                self.length,
                &b.qkv,
                keys,
                values,
                &mut b.attended,
            );
            b.inputs.prepare(&b.attended, count, layer.output.needs());
            layer.output.multiply(&b.inputs, &mut b.projected);
            if let Some(norm) = &layer.post_attention_norm {
                ops::rms_norm_rows(&mut b.projected, norm, shape.norm_epsilon);
            }
            ops::add(&mut b.residual, &b.projected);

            // Feed-forward.
            ops::rms_norm(
                &b.residual,
                &layer.feed_forward_norm,
                shape.norm_epsilon,
                &mut b.normed,
            );
            b.inputs.prepare(&b.normed, count, layer.gate_up.needs());
            layer.gate_up.multiply(&b.inputs, &mut b.gate_up);
            ops::gated(
                family.activation,
                &b.gate_up,
                shape.feed_forward,
                &mut b.activated,
            );
            b.inputs.prepare(&b.activated, count, layer.down.needs());
            layer.down.multiply(&b.inputs, &mut b.projected);
            if let Some(norm) = &layer.post_feed_forward_norm {
                ops::rms_norm_rows(&mut b.projected, norm, shape.norm_epsilon);
            }
            ops::add(&mut b.residual, &b.projected);
        }
        self.length += count;

        // Only the last token's next token is asked for.
        let last = &b.residual[(count - 1) * width..];
        let normed = &mut b.normed[..width];
        ops::rms_norm(last, &model.output_norm, shape.norm_epsilon, normed);
        b.inputs.prepare(normed, 1, model.output_matrix().needs());
        model.output_matrix().multiply(&b.inputs, &mut self.logits);
        if let Some(cap) = shape.output_cap {
            self.logits
                .iter_mut()
                .for_each(|logit| *logit = (*logit * (1.0 / cap)).tanh() * cap);
        }
        Ok(())
    }
}
