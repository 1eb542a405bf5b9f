"""Mirrors yunjey's pytorch-tutorial, language model
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/02-intermediate/language_model/main.py):
a word corpus as a LongTensor of ids, an Embedding-LSTM-Linear model trained by
Adam on truncated sequences with the states detached between batches,
nn.utils.clip_grad_norm_, perplexity from np.exp(loss.item()), then sampling
with torch.multinomial into input.fill_(word_id)."""
import numpy as np

from script_data import set_weights

LOOSE = {"sampled": 1e9}  # sampling draws from each library's generator: only the count compares
TOLERANCE = dict(rtol=2e-3, atol=2e-4)

TEXT = """the quick brown fox jumps over the lazy dog <eos> the dog sleeps under the old tree <eos>
a fox runs over the hill and the dog follows the fox <eos> the tree stands on the hill <eos>""" * 4


def main(torch, workdir):
    nn = torch.nn
    torch.manual_seed(0)
    embed_size, hidden_size, num_layers = 16, 32, 1
    num_epochs, batch_size, seq_length, learning_rate = 4, 4, 6, 0.01

    word2idx, idx2word = {}, {}
    tokens = TEXT.split()
    for word in tokens:
        if word not in word2idx:
            idx2word[len(word2idx)] = word
            word2idx[word] = len(word2idx)
    ids = torch.LongTensor(len(tokens))
    for token, word in enumerate(tokens):
        ids[token] = word2idx[word]
    num_batches = ids.size(0) // batch_size
    ids = ids[:num_batches * batch_size].view(batch_size, -1)
    vocab_size = len(word2idx)
    num_batches = ids.size(1) // seq_length

    class RNNLM(nn.Module):
        def __init__(self, vocab_size, embed_size, hidden_size, num_layers):
            super(RNNLM, self).__init__()
            self.embed = nn.Embedding(vocab_size, embed_size)
            self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
            self.linear = nn.Linear(hidden_size, vocab_size)

        def forward(self, x, h):
            x = self.embed(x)
            out, (h, c) = self.lstm(x, h)
            out = out.reshape(out.size(0) * out.size(1), out.size(2))
            out = self.linear(out)
            return out, (h, c)

    model = set_weights(torch, RNNLM(vocab_size, embed_size, hidden_size, num_layers), seed=47)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def detach(states):
        return [state.detach() for state in states]

    perplexities = []
    for epoch in range(num_epochs):
        states = (torch.zeros(num_layers, batch_size, hidden_size),
                  torch.zeros(num_layers, batch_size, hidden_size))
        for i in range(0, ids.size(1) - seq_length, seq_length):
            inputs = ids[:, i:i + seq_length]
            targets = ids[:, (i + 1):(i + 1) + seq_length]
            states = detach(states)
            outputs, states = model(inputs, states)
            loss = criterion(outputs, targets.reshape(-1))
            model.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
        print('Epoch [{}/{}], Loss: {:.4f}, Perplexity: {:5.2f}'
              .format(epoch + 1, num_epochs, loss.item(), np.exp(loss.item())))
        perplexities.append(np.exp(loss.item()))

    words = []
    with torch.no_grad():
        state = (torch.zeros(num_layers, 1, hidden_size), torch.zeros(num_layers, 1, hidden_size))
        prob = torch.ones(vocab_size)
        input = torch.multinomial(prob, num_samples=1).unsqueeze(1)
        for i in range(20):
            output, state = model(input, state)
            prob = output.exp()
            word_id = torch.multinomial(prob, num_samples=1).item()
            input.fill_(word_id)
            words.append(idx2word[word_id])
    print(' '.join(words))
    assert perplexities[-1] < perplexities[0] and input.dtype == torch.int64
    return dict(perplexities=perplexities, sampled=len(words), batches=num_batches)
