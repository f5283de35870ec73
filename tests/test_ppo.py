"""PPO's whole update (:meth:`PPO.learn_rollout`) held to a plain-torch reference.

The reference below is written from the algorithm's definition, not from the learner's code: it
takes the learner's networks as they are before the update, computes the values, GAE, returns,
normalisers, old log-probabilities and the clipped losses with explicit loops and
``torch.distributions``, and steps them with ``torch.optim.Adam`` and ``clip_grad_norm_``. Every
setting that could be confused with another differs (gamma != lambda, actor and critic rates,
several epochs and minibatches, clipping that binds, a normaliser with history, a truncated and a
terminated step, rows of a dead agent), so that one wrong line in the learner fails the test.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal

from evohpo.algos.base import OnPolicyHyperparams
from evohpo.algos.onpolicy import Rollout
from evohpo.algos.ppo import PPO
from evohpo.algos.sharing import bias
from evohpo.algos.switches import OnPolicySwitches
from evohpo.envs.spec import AgentSpec, EnvSpec

HP = OnPolicyHyperparams(lr_actor=3e-3, lr_critic=7e-3, rollout=5, epochs=3, minibatches=3,
                         clip=0.15, ent_coef=0.05, gae_lambda=0.7)
GAMMA, MAX_NORM = 0.9, 0.3
T, K = 5, 2


def make_spec(shared_discrete: bool) -> EnvSpec:
    """Two agents of one kind (sharable) and one of another kind with the other action head."""
    pair = (AgentSpec(4, True, 3) if shared_discrete else AgentSpec(4, False, 2, -1.0, 1.0))
    other = AgentSpec(3, False, 2) if shared_discrete else AgentSpec(3, True, 4)
    return EnvSpec("toy", ("agent_0", "agent_1", "scout_0"),
                   {"agent_0": pair, "agent_1": pair, "scout_0": other})


def make_rollout(spec: EnvSpec, seed: int) -> Rollout:
    """``T`` steps of ``K`` envs: env 0 truncates at t=1 (done, not terminated), env 1 terminates
    at t=3; the scout is dead on env 1 after its termination and on one early row."""
    rng = np.random.default_rng(seed)
    obs = {a: rng.normal(size=(T, K, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    nxt = {a: rng.normal(size=(T, K, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    actions = {}
    for a in spec.agents:
        s = spec[a]
        actions[a] = (rng.integers(0, s.act_dim, (T, K, 1)).astype(np.float32) if s.discrete
                      else rng.normal(size=(T, K, s.act_dim)).astype(np.float32))
    done = np.zeros((T, K), np.float32)
    done[1, 0] = done[3, 1] = 1.0
    terminated = {a: np.zeros((T, K), np.float32) for a in spec.agents}
    alive = {a: np.ones((T, K), np.float32) for a in spec.agents}
    for a in spec.agents:
        terminated[a][3, 1] = 1.0
    alive["scout_0"][0, 0] = 0.0
    alive["scout_0"][4, 1] = 0.0
    rewards = {a: rng.normal(size=(T, K)).astype(np.float32) * 3.0 for a in spec.agents}
    return Rollout(obs=obs, actions=actions, rewards=rewards, next_obs=nxt,
                   terminated=terminated, alive=alive, done=done)


def make_ppo(spec: EnvSpec, centralised: bool, share: bool) -> PPO:
    sw = OnPolicySwitches(centralised=centralised, gamma=GAMMA, max_grad_norm=MAX_NORM,
                          share=share)
    ppo = PPO(spec, HP, sw, [8, 6], "tanh", seed=3)
    # a normaliser with history, so that merging and normalising are both exercised
    for i, norm in enumerate({id(n): n for n in ppo.value_norms.values()}.values()):
        norm.load_state_dict({"mean": 1.5 - i, "var": 2.0 + i, "count": 7.0})
    return ppo


# ------------------------------------------------------------------------------- the reference
class Reference:
    """PPO from its definition, on a copy of a learner's networks before its first update."""

    def __init__(self, ppo: PPO) -> None:
        self.spec, self.centralised = ppo.spec, ppo.sw.centralised
        self.actors, self.critics, self.log_std = copy.deepcopy(
            (ppo.actors, {a: c[0] for a, c in ppo.critics.items()}, ppo.log_std))
        self.groups = [tuple(a for a in self.spec.agents if prefix(a) == p)
                       for p in dict.fromkeys(prefix(a) for a in self.spec.agents)] \
            if ppo.sw.share else [(a,) for a in self.spec.agents]
        self.norms = {g: dict(ppo.value_norms[g[0]].state_dict()) for g in self.groups}
        self.gen = torch.Generator().manual_seed(0)
        self.gen.set_state(ppo.gen.get_state())
        self.opts: list[tuple[torch.optim.Optimizer, list[torch.Tensor]]] = []
        for g in self.groups:
            lead = g[0]
            for nets, lr in ((self.actors, HP.lr_actor), (self.critics, HP.lr_critic)):
                # the group's leader steps its whole network; every other agent its own bias
                own: list[list[torch.Tensor]] = [list(nets[lead].parameters())]
                own += [[bias(nets[a])] for a in g[1:]]
                self.opts += [(torch.optim.Adam(ps, lr=lr), ps) for ps in own]
            if not self.spec[lead].discrete:
                ps = [self.log_std[lead]]
                self.opts.append((torch.optim.Adam(ps, lr=HP.lr_actor), ps))
            for a in g[1:]:  # a group holds one log-std
                if a in self.log_std:
                    self.log_std[a] = self.log_std[lead]

    def dist(self, a: str, x: torch.Tensor) -> Categorical | Normal:
        out = self.actors[a](x)
        if self.spec[a].discrete:
            return Categorical(logits=out)
        return Normal(out, self.log_std[a].exp().expand_as(out))

    def logp(self, a: str, x: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        d = self.dist(a, x)
        if self.spec[a].discrete:
            return d.log_prob(act[:, 0].long())
        return d.log_prob(act).sum(-1)

    def entropy(self, a: str, x: torch.Tensor) -> torch.Tensor:
        d = self.dist(a, x)
        return d.entropy() if self.spec[a].discrete else d.entropy().sum(-1)

    def critic_input(self, obs: dict[str, torch.Tensor], a: str) -> torch.Tensor:
        if self.centralised:
            return torch.cat([obs[b] for b in self.spec.agents], dim=-1)
        return obs[a]

    def prepare(self, ro: Rollout) -> dict[str, dict[str, torch.Tensor]]:
        n = T * K
        obs = {a: torch.tensor(ro.obs[a]).reshape(n, -1) for a in self.spec.agents}
        nxt = {a: torch.tensor(ro.next_obs[a]).reshape(n, -1) for a in self.spec.agents}
        data: dict[str, dict[str, torch.Tensor]] = {}
        with torch.no_grad():
            for g in self.groups:
                m0, v0, c0 = (self.norms[g][k] for k in ("mean", "var", "count"))
                sd0 = math.sqrt(max(v0, 1e-8))
                for a in g:
                    critic = self.critics[a]
                    raw = critic(self.critic_input(obs, a)).reshape(T, K)
                    value = raw * sd0 + m0
                    next_value = critic(self.critic_input(nxt, a)).reshape(T, K) * sd0 + m0
                    r = torch.tensor(ro.rewards[a])
                    term = torch.tensor(ro.terminated[a])
                    done = torch.tensor(ro.done)
                    adv = torch.zeros(T, K)
                    for e in range(K):
                        running = 0.0
                        for t in reversed(range(T)):
                            boot = 0.0 if term[t, e] else GAMMA * float(next_value[t, e])
                            delta = float(r[t, e]) + boot - float(value[t, e])
                            running = delta + (0.0 if done[t, e] else
                                               GAMMA * HP.gae_lambda * running)
                            adv[t, e] = running
                    ret = (adv + value).reshape(n)
                    alive = torch.tensor(ro.alive[a]).reshape(n)
                    live = adv.reshape(n)[alive > 0]
                    adv_n = (adv.reshape(n) - live.mean()) / (live.std() + 1e-8)
                    act = torch.tensor(ro.actions[a]).reshape(n, -1)
                    data[a] = {"obs": obs[a], "x": self.critic_input(obs, a), "act": act,
                               "adv": adv_n, "ret": ret, "v_old": raw.reshape(n),
                               "alive": alive, "logp_old": self.logp(a, obs[a], act)}
                seen = torch.cat([data[a]["ret"][data[a]["alive"] > 0] for a in g]).double()
                c1, m1, v1 = float(seen.numel()), float(seen.mean()), float(seen.var(False))
                c = c0 + c1
                mean = (c0 * m0 + c1 * m1) / c
                var = (c0 * (v0 + (m0 - mean) ** 2) + c1 * (v1 + (m1 - mean) ** 2)) / c
                self.norms[g] = {"mean": mean, "var": var, "count": c}
                for a in g:
                    data[a]["ret"] = (data[a]["ret"] - mean) / math.sqrt(max(var, 1e-8))
        return data

    def update(self, ro: Rollout) -> None:
        data = self.prepare(ro)
        n = T * K
        size = math.ceil(n / HP.minibatches)
        for _ in range(HP.epochs):
            perm = torch.randperm(n, generator=self.gen)
            for idx in perm.split(size):
                total = torch.zeros(())
                for a, d in data.items():
                    mask = d["alive"][idx]
                    denom = max(float(mask.sum()), 1.0)
                    ratio = (self.logp(a, d["obs"][idx], d["act"][idx])
                             - d["logp_old"][idx]).exp()
                    adv = d["adv"][idx]
                    surr = torch.min(ratio * adv,
                                     ratio.clamp(1 - HP.clip, 1 + HP.clip) * adv)
                    bonus = HP.ent_coef * self.entropy(a, d["obs"][idx])
                    total = total - (mask * (surr + bonus)).sum() / denom
                    v = self.critics[a](d["x"][idx]).squeeze(-1)
                    v_old, ret = d["v_old"][idx], d["ret"][idx]
                    v_clip = v_old + (v - v_old).clamp(-HP.clip, HP.clip)
                    err = torch.max((v - ret) ** 2, (v_clip - ret) ** 2)
                    total = total + (mask * err).sum() / denom
                for opt, _ in self.opts:
                    opt.zero_grad()
                total.backward()
                for opt, ps in self.opts:
                    torch.nn.utils.clip_grad_norm_(ps, MAX_NORM)
                    opt.step()


def prefix(agent: str) -> str:
    return agent.rsplit("_", 1)[0]


# ------------------------------------------------------------------------------- the tests
CASES = [pytest.param(c, s, d, id=f"{'mappo' if c else 'ippo'}{'+share' if s else ''}"
                      f"-{'discrete' if d else 'continuous'}-pair")
         for c in (False, True) for s in (False, True) for d in (False, True)]


@pytest.mark.parametrize(("centralised", "share", "shared_discrete"), CASES)
def test_learn_rollout_equals_the_reference_update(centralised: bool, share: bool,
                                                   shared_discrete: bool) -> None:
    """Two successive updates (Adam's moments and the normaliser carried from the first into the
    second) give the reference's weights, log-stds, normalisers and std, within float rounding."""
    spec = make_spec(shared_discrete)
    ppo = make_ppo(spec, centralised, share)
    ref = Reference(ppo)
    for seed in (1, 2):
        ro = make_rollout(spec, seed)
        ppo.learn_rollout(ro)
        ref.update(ro)
    for a in spec.agents:
        for mine, theirs in ((ppo.actors[a], ref.actors[a]), (ppo.critics[a][0], ref.critics[a])):
            for p, q in zip(mine.parameters(), theirs.parameters(), strict=True):
                torch.testing.assert_close(p, q, rtol=1e-4, atol=2e-5)
        if a in ref.log_std:
            torch.testing.assert_close(ppo.log_std[a], ref.log_std[a], rtol=1e-4, atol=2e-5)
            # the std the policy samples with is the updated one, not a stale cache
            np.testing.assert_allclose(ppo.std(a), ref.log_std[a].detach().exp().numpy(),
                                       rtol=1e-4)
    for g, norm in ref.norms.items():
        got = ppo.value_norms[g[0]].state_dict()
        assert got["count"] == norm["count"]
        assert got["mean"] == pytest.approx(norm["mean"], rel=1e-5, abs=1e-5)
        assert got["var"] == pytest.approx(norm["var"], rel=1e-5)
    assert ppo.updates == 2


def test_the_reference_is_sensitive_to_what_it_checks() -> None:
    """The settings that a wrong line could confuse differ enough to move the weights: the
    reference with lambda replaced by gamma, or without the truncation, ends elsewhere."""
    spec = make_spec(False)
    ppo = make_ppo(spec, True, False)
    ro = make_rollout(spec, 1)
    ref, wrong = Reference(ppo), Reference(ppo)
    ref.update(ro)
    ro_wrong = copy.deepcopy(ro)
    ro_wrong.done[1, 0] = 0.0  # the truncation forgotten
    wrong.update(ro_wrong)
    a = spec.agents[0]
    gap = max(float((p - q).detach().abs().max())
              for p, q in zip(ref.critics[a].parameters(), wrong.critics[a].parameters(),
                              strict=True))
    assert gap > 1e-3


def test_a_restored_learner_carries_every_piece_of_its_state() -> None:
    """A learner's state dict restores weights, log-stds (and so the std it samples with), every
    optimizer's moments and step counts, the normalisers, its random stream and its counts: the
    restored learner's next update equals the original's."""
    spec = make_spec(False)
    ppo = make_ppo(spec, True, False)
    ppo.learn_rollout(make_rollout(spec, 1))
    back = PPO.from_state_dict(spec, ppo.sw, copy.deepcopy(ppo.state_dict()))
    for a in spec.agents:
        if a in ppo.log_std:
            torch.testing.assert_close(back.log_std[a], ppo.log_std[a], rtol=0, atol=0)
            np.testing.assert_array_equal(back.std(a), ppo.std(a))
            assert not torch.allclose(back.log_std[a], torch.full_like(back.log_std[a], -0.5))
        assert back.value_norms[a].state_dict() == ppo.value_norms[a].state_dict()
    for kind in ("actor_opts", "std_opts", "critic_opts"):
        for a, opt in getattr(ppo, kind).items():
            mine, theirs = opt.state_dict()["state"], getattr(back, kind)[a].state_dict()["state"]
            assert mine.keys() == theirs.keys() and mine
            for key in mine:
                for field in ("exp_avg", "exp_avg_sq", "step"):
                    torch.testing.assert_close(theirs[key][field], mine[key][field],
                                               rtol=0, atol=0)
    assert back.updates == ppo.updates and back.hp == ppo.hp
    assert torch.equal(back.gen.get_state(), ppo.gen.get_state())
    ro = make_rollout(spec, 2)
    m1, m2 = ppo.learn_rollout(ro), back.learn_rollout(ro)
    assert m1 == m2
    for a in spec.agents:
        for p, q in zip(ppo.actors[a].parameters(), back.actors[a].parameters(), strict=True):
            assert torch.equal(p, q)


def test_a_continuous_std_follows_each_update() -> None:
    """The std a continuous agent samples with is its log-std's exponential after every update
    and every load (a cache is refreshed, never stale)."""
    spec = make_spec(False)
    ppo = make_ppo(spec, False, False)
    a = "agent_0"
    first = ppo.std(a).copy()
    np.testing.assert_allclose(first, np.exp(-0.5), rtol=1e-6)
    ppo.learn_rollout(make_rollout(spec, 1))
    np.testing.assert_allclose(ppo.std(a), ppo.log_std[a].detach().exp().numpy(), rtol=1e-6)
    assert not np.allclose(ppo.std(a), first)
    other = make_ppo(spec, False, False)
    other.std(a)  # cached before the load
    other.load_state_dict(ppo.state_dict())
    np.testing.assert_array_equal(other.std(a), ppo.std(a))

