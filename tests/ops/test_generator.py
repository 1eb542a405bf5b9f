"""jitgrad.Generator against torch.Generator: seeding, state, the `generator=`
keyword of every random draw, and the errors. The numbers differ from torch's
(numpy's PCG64 against torch's Mersenne Twister); what is compared is behaviour:
the same seed gives the same draws, and drawing from a generator leaves the
default one alone."""
import copy
import pickle

import numpy as np
import pytest

import jitgrad
from helpers import to_numpy
from jitgrad.ops.creation import rng_of

# name -> draw(lib, generator): one call of each function taking `generator=`
DRAWS = {
    "rand": lambda lib, g: lib.rand(2, 3, generator=g),
    "randn": lambda lib, g: lib.randn(4, generator=g),
    "randint": lambda lib, g: lib.randint(0, 100, (5,), generator=g),
    "randint_high": lambda lib, g: lib.randint(100, (5,), generator=g),
    "randperm": lambda lib, g: lib.randperm(10, generator=g),
    "rand_like": lambda lib, g: lib.rand_like(lib.zeros(3), generator=g),
    "randn_like": lambda lib, g: lib.randn_like(lib.zeros(3), generator=g),
    "randint_like": lambda lib, g: lib.randint_like(lib.zeros(3), 9, generator=g),
    "normal_numbers": lambda lib, g: lib.normal(0.0, 2.0, (4,), generator=g),
    "normal_tensor": lambda lib, g: lib.normal(lib.zeros(4), lib.ones(4), generator=g),
    "bernoulli": lambda lib, g: lib.bernoulli(lib.full((8,), 0.5), generator=g),
    "Tensor.bernoulli": lambda lib, g: lib.full((8,), 0.5).bernoulli(generator=g),
    "multinomial": lambda lib, g: lib.multinomial(lib.ones(6), 3, generator=g),
    "Tensor.normal_": lambda lib, g: lib.zeros(5).normal_(0.0, 2.0, generator=g),
    "Tensor.normal_named": lambda lib, g: lib.zeros(5).normal_(mean=1.0, std=0.1, generator=g),
    "Tensor.uniform_": lambda lib, g: lib.zeros(5).uniform_(-1.0, 1.0, generator=g),
    "Tensor.uniform_to": lambda lib, g: lib.zeros(5).uniform_(to=3.0, generator=g),
    "Tensor.exponential_": lambda lib, g: lib.zeros(5).exponential_(generator=g),
    "Tensor.bernoulli_": lambda lib, g: lib.zeros(5).bernoulli_(0.3, generator=g),
    "Tensor.random_": lambda lib, g: lib.zeros(5).random_(0, 10, generator=g),
    "Tensor.cauchy_": lambda lib, g: lib.zeros(5).cauchy_(1.0, 2.0, generator=g),
    "Tensor.log_normal_": lambda lib, g: lib.zeros(5).log_normal_(mean=0.0, std=0.5, generator=g),
    "Tensor.geometric_": lambda lib, g: lib.zeros(5).geometric_(0.3, generator=g),
    "init.uniform_": lambda lib, g: lib.nn.init.uniform_(lib.empty(3, 4), generator=g),
    "init.normal_": lambda lib, g: lib.nn.init.normal_(lib.empty(3, 4), generator=g),
    "init.xavier_uniform_": lambda lib, g: lib.nn.init.xavier_uniform_(lib.empty(3, 4), generator=g),
    "init.xavier_normal_": lambda lib, g: lib.nn.init.xavier_normal_(lib.empty(3, 4), generator=g),
    "init.kaiming_uniform_": lambda lib, g: lib.nn.init.kaiming_uniform_(lib.empty(3, 4),
                                                                         generator=g),
    "init.kaiming_normal_": lambda lib, g: lib.nn.init.kaiming_normal_(lib.empty(3, 4),
                                                                       generator=g),
    "random_split": lambda lib, g: [list(s) for s in lib.utils.data.random_split(
        range(10), [3, 7], generator=g)],
    "RandomSampler": lambda lib, g: list(lib.utils.data.RandomSampler(range(10), generator=g)),
    "RandomSampler_replacement": lambda lib, g: list(lib.utils.data.RandomSampler(
        range(10), replacement=True, num_samples=20, generator=g)),
    "SubsetRandomSampler": lambda lib, g: list(lib.utils.data.SubsetRandomSampler(
        [2, 4, 6, 8], generator=g)),
    "WeightedRandomSampler": lambda lib, g: list(lib.utils.data.WeightedRandomSampler(
        [1.0, 2.0, 3.0], 10, generator=g)),
    "DataLoader_shuffle": lambda lib, g: [b.tolist() for b in lib.utils.data.DataLoader(
        lib.arange(10), batch_size=4, shuffle=True, generator=g)],
}


def _plain(v):
    return to_numpy(v).tolist() if hasattr(v, "shape") else v


def _state(lib):
    return to_numpy(lib.get_rng_state())


@pytest.mark.parametrize("name", DRAWS)
def test_same_seed_same_draws_and_the_default_generator_untouched(lib, name):
    draw = DRAWS[name]
    lib.manual_seed(0)
    before = _state(lib)
    first = [_plain(draw(lib, lib.Generator().manual_seed(5))) for _ in range(2)]
    assert first[0] == first[1]
    np.testing.assert_array_equal(_state(lib), before)
    g = lib.Generator().manual_seed(5)
    assert _plain(draw(lib, g)) == first[0]
    assert g.get_state().tolist() != lib.Generator().manual_seed(5).get_state().tolist()


@pytest.mark.parametrize("name", DRAWS)
def test_a_wrong_generator_type_is_refused(lib, name):
    with pytest.raises(TypeError, match="generator"):
        DRAWS[name](lib, 5)


def test_jitgrad_checks_the_generator_when_a_sampler_or_loader_is_made():
    """torch fails at the first epoch; jitgrad at once, naming the class."""
    data = jitgrad.utils.data
    for make in (lambda: data.RandomSampler(range(3), generator="x"),
                 lambda: data.SubsetRandomSampler([0, 1], generator="x"),
                 lambda: data.WeightedRandomSampler([1.0, 1.0], 2, generator="x"),
                 lambda: data.DataLoader(range(3), generator="x")):
        with pytest.raises(TypeError, match=r"\(\): argument 'generator' must be jitgrad.Generator, "
                                            "not str"):
            make()


def test_a_new_generator_starts_from_torchs_default_seed(lib):
    a, b = lib.Generator(), lib.Generator()
    assert a.initial_seed() == b.initial_seed() == 67280421310721
    assert _plain(lib.rand(6, generator=a)) == _plain(lib.rand(6, generator=b))
    assert str(a.device) == "cpu" and a.device == lib.device("cpu")
    assert lib.Generator("cpu").device == lib.Generator(device=lib.device("cpu")).device
    with pytest.raises(AttributeError):
        a.device = "cpu"


def test_manual_seed_seeds_and_returns_the_default_generator(lib):
    assert lib.manual_seed(3) is lib.default_generator
    assert lib.initial_seed() == 3 == lib.default_generator.initial_seed()
    a = lib.rand(4)
    lib.default_generator.manual_seed(3)
    assert lib.rand(4).equal(a)
    assert lib.manual_seed(1.5).initial_seed() == 1  # torch's manual_seed takes int(seed)
    assert lib.manual_seed(True).initial_seed() == 1


def test_seeds_wrap_modulo_two_to_the_64(lib):
    g = lib.Generator()
    assert g.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert g.manual_seed(-2 ** 63).initial_seed() == 2 ** 63
    assert g.manual_seed(2 ** 64 - 1).initial_seed() == 2 ** 64 - 1


@pytest.mark.parametrize("seed, error, message", [
    (1.5, RuntimeError, "manual_seed expected a long, but got float"),
    (True, RuntimeError, "manual_seed expected a long, but got bool"),
    ("1", RuntimeError, "manual_seed expected a long, but got str"),
    (2 ** 64, ValueError, "Overflow when unpacking long long"),
    (-2 ** 63 - 1, ValueError, "Overflow when unpacking long long"),
])
def test_generator_manual_seed_errors(lib, seed, error, message):
    g = lib.Generator().manual_seed(11)
    state = g.get_state()
    with pytest.raises(error, match=message):
        g.manual_seed(seed)
    assert g.get_state().equal(state) and g.initial_seed() == 11


def test_seed_draws_a_fresh_seed(lib):
    g = lib.Generator()
    s = g.seed()
    assert type(s) is int and 0 <= s < 2 ** 64 and g.initial_seed() == s
    assert g.seed() != s
    s = lib.seed()
    assert lib.initial_seed() == s


def test_state_round_trips_with_its_seed(lib):
    g = lib.Generator().manual_seed(5)
    lib.rand(3, generator=g)
    state = g.get_state()
    a = lib.randn(7, generator=g)
    assert g.set_state(state) is g
    assert lib.randn(7, generator=g).equal(a)
    other = lib.Generator().manual_seed(9).set_state(state)
    assert other.initial_seed() == 5 and lib.randn(7, generator=other).equal(a)
    lib.set_rng_state(state)
    assert lib.randn(7).equal(a) and lib.initial_seed() == 5
    clone = g.set_state(state).clone_state()
    assert clone is not g and lib.randn(7, generator=clone).equal(a)
    assert lib.randn(7, generator=g).equal(a)


def test_get_state_is_a_copy(lib):
    g = lib.Generator()
    state = g.get_state()
    lib.rand(3, generator=g)
    assert not g.get_state().equal(state)
    assert state.equal(lib.Generator().get_state())


def test_generators_pickle_and_deepcopy_with_their_state(lib):
    g = lib.Generator().manual_seed(4)
    lib.rand(2, generator=g)
    for twin in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert twin is not g and twin.initial_seed() == 4
        assert lib.rand(5, generator=twin).equal(lib.rand(5, generator=copy.deepcopy(g)))


def test_set_state_errors(lib):
    g = lib.Generator().manual_seed(2)
    state = g.get_state()
    with pytest.raises(TypeError, match="but got list"):
        g.set_state([1, 2])
    with pytest.raises(TypeError, match="RNG state must be"):
        g.set_state(lib.zeros(state.shape))
    with pytest.raises(RuntimeError, match="found the input RNG state size to be"):
        g.set_state(lib.zeros(3, dtype=state.dtype))
    assert g.get_state().equal(state)


def test_jitgrad_state_errors_say_what_to_pass():
    g = jitgrad.Generator()
    with pytest.raises(TypeError, match="int64 tensor of 7 words that Generator.get_state"):
        g.set_state(jitgrad.zeros(7))
    with pytest.raises(RuntimeError, match=r"size to be \[7, 1\]"):
        g.set_state(g.get_state().reshape(7, 1))


def test_the_generator_device_must_match_the_result():
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but "
                                           "found 'cpu'"):
        rng_of(jitgrad.Generator(), jitgrad.device("cuda"), "rand")
    assert rng_of(None, jitgrad.device("cuda"), "rand") is jitgrad.default_generator.rng


def test_generator_on_each_device(device):
    g = jitgrad.Generator(device).manual_seed(1)
    a = jitgrad.rand(3, generator=g, device=device)
    assert a.device.type == g.device.type == device
    g.manual_seed(1)
    assert jitgrad.rand(3, generator=g, device=device).equal(a)
    assert jitgrad.zeros(3, device=device).normal_(generator=g).device.type == device
    if device != "cpu":
        with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but "
                                               f"found '{device}'"):
            jitgrad.rand(3, generator=g)


@pytest.mark.parametrize("call", [
    lambda lib, g: lib.randint(5, 5, (2,), generator=g),
    lambda lib, g: lib.normal(0.0, -1.0, (2,), generator=g),
    lambda lib, g: lib.zeros(2).uniform_(1.0, 0.0, generator=g),
    lambda lib, g: lib.multinomial(lib.zeros(3), 1, generator=g),
    lambda lib, g: lib.zeros(3, requires_grad=True).normal_(generator=g),
], ids=["randint", "normal", "uniform_", "multinomial", "normal_on_a_leaf"])
def test_a_failed_draw_leaves_the_generator_where_it_was(lib, call):
    g = lib.Generator().manual_seed(3)
    state = g.get_state()
    with pytest.raises(RuntimeError):
        call(lib, g)
    assert g.get_state().equal(state)


def test_a_numpy_generator_is_accepted_too():
    """jitgrad's extension: numpy Generators draw as they are."""
    a = jitgrad.rand(4, generator=np.random.default_rng(1))
    assert a.equal(jitgrad.rand(4, generator=np.random.default_rng(1)))


def test_compiled_replays_draw_from_the_generator():
    g = jitgrad.Generator().manual_seed(1)

    def step(x):
        return x + jitgrad.rand(3, generator=g)
    compiled = jitgrad.compile(step)
    x = jitgrad.zeros(3)
    got = [compiled(x) for _ in range(4)]
    g.manual_seed(1)
    assert all(a.equal(step(x)) for a in got)
    assert not got[2].equal(got[3])


@pytest.mark.parametrize("fill, args, message", [
    ("normal_", (0.0, -1.0), "normal expects std >= 0.0"),
    ("uniform_", (1.0, 0.0), r"uniform_ expects to return a \[from, to\) range"),
    ("exponential_", (0.0,), "exponential_ expects lambda > 0.0, but found lambda=0"),
    ("cauchy_", (0.0, -1.0), "cauchy_ expects sigma > 0.0, but found sigma=-1"),
    ("log_normal_", (1.0, 0.0), "log_normal_ expects std > 0.0, but found std=0"),
    ("geometric_", (1.0,), r"geometric_ expects p to be in \(0, 1\), but got p=1"),
    ("bernoulli_", (1.5,), r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"),
])
def test_fill_parameter_errors(lib, fill, args, message):
    with pytest.raises(RuntimeError, match=message):
        getattr(lib.zeros(3), fill)(*args)


@pytest.mark.parametrize("fill", ["normal_", "uniform_", "exponential_", "cauchy_", "log_normal_"])
def test_continuous_fills_need_a_float_tensor(lib, fill):
    with pytest.raises(RuntimeError):  # torch: RuntimeError or its NotImplementedError
        getattr(lib.zeros(3, dtype=lib.int64), fill)()
    assert set(to_numpy(lib.zeros(50, dtype=lib.int64).geometric_(0.5))) >= {1, 2}


@pytest.mark.parametrize("fill, args", [("cauchy_", ()), ("log_normal_", ()), ("geometric_", (0.5,)),
                                        ("exponential_", ()), ("normal_", ())])
def test_fill_nodes_are_named_as_torchs(lib, fill, args):
    x = lib.zeros(3, requires_grad=True).clone()
    getattr(x, fill)(*args)
    assert x.grad_fn.name() == fill[:-1].title().replace("_", "") + "Backward0"
    x.sum().backward()


def test_new_fills_draw_their_distributions():
    g = jitgrad.Generator().manual_seed(0)
    n = 40000
    geometric = to_numpy(jitgrad.zeros(n).geometric_(0.25, generator=g))
    assert geometric.min() == 1 and abs(geometric.mean() - 4.0) < 0.1
    logs = np.log(to_numpy(jitgrad.zeros(n, dtype=jitgrad.float64).log_normal_(0.5, 0.25,
                                                                              generator=g)))
    assert abs(logs.mean() - 0.5) < 0.01 and abs(logs.std() - 0.25) < 0.01
    cauchy = to_numpy(jitgrad.zeros(n, dtype=jitgrad.float64).cauchy_(3.0, 2.0, generator=g))
    q1, median, q3 = np.percentile(cauchy, [25, 50, 75])
    assert abs(median - 3.0) < 0.1 and abs((q3 - q1) - 4.0) < 0.2  # quartiles at median -+ sigma
