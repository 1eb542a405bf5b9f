"""Mirrors the PyTorch NLP tutorial "Sequence Models and Long Short-Term Memory
Networks" (https://pytorch.org/tutorials/beginner/nlp/sequence_models_tutorial.html):
an nn.LSTM stepped one input at a time with its (h, c) state and then fed the
whole sequence at once (the same outputs), and an LSTMTagger (Embedding, LSTM,
Linear, log_softmax over tags) trained by SGD on two tagged sentences."""
import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=1e-4, atol=1e-6)


def main(torch, workdir):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    rng = np.random.default_rng(43)
    lstm = set_weights(torch, nn.LSTM(3, 3), seed=43)
    inputs = [torch.tensor(rng.standard_normal((1, 3)), dtype=torch.float32) for _ in range(5)]
    hidden = (torch.tensor(rng.standard_normal((1, 1, 3)), dtype=torch.float32),
              torch.tensor(rng.standard_normal((1, 1, 3)), dtype=torch.float32))
    start = hidden
    for i in inputs:
        out, hidden = lstm(i.view(1, 1, -1), hidden)
    inputs = torch.cat(inputs).view(len(inputs), 1, -1)
    out_all, hidden_all = lstm(inputs, start)
    assert torch.allclose(out_all[-1], out) and torch.allclose(hidden_all[1], hidden[1])

    def prepare_sequence(seq, to_ix):
        idxs = [to_ix[w] for w in seq]
        return torch.tensor(idxs, dtype=torch.long)

    training_data = [
        ("The dog ate the apple".split(), ["DET", "NN", "V", "DET", "NN"]),
        ("Everybody read that book".split(), ["NN", "V", "DET", "NN"]),
    ]
    word_to_ix = {}
    for sent, tags in training_data:
        for word in sent:
            if word not in word_to_ix:
                word_to_ix[word] = len(word_to_ix)
    tag_to_ix = {"DET": 0, "NN": 1, "V": 2}
    EMBEDDING_DIM = HIDDEN_DIM = 6

    class LSTMTagger(nn.Module):
        def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
            super(LSTMTagger, self).__init__()
            self.hidden_dim = hidden_dim
            self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim)
            self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

        def forward(self, sentence):
            embeds = self.word_embeddings(sentence)
            lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
            tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
            tag_scores = F.log_softmax(tag_space, dim=1)
            return tag_scores

    model = set_weights(torch, LSTMTagger(EMBEDDING_DIM, HIDDEN_DIM, len(word_to_ix), len(tag_to_ix)),
                        seed=44)
    loss_function = nn.NLLLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.5)
    with torch.no_grad():
        before = model(prepare_sequence(training_data[0][0], word_to_ix))
    for epoch in range(100):
        for sentence, tags in training_data:
            model.zero_grad()
            sentence_in = prepare_sequence(sentence, word_to_ix)
            targets = prepare_sequence(tags, tag_to_ix)
            tag_scores = model(sentence_in)
            loss = loss_function(tag_scores, targets)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        after = model(prepare_sequence(training_data[0][0], word_to_ix))
    print(after)
    assert after.argmax(1).tolist() == [0, 1, 2, 0, 1]
    return dict(stepped=out, whole=out_all, before=before, after=after)
