"""Mirrors MorvanZhou's PyTorch-Tutorial 406_GAN
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/406_GAN.py):
a generator and a discriminator as nn.Sequential, losses written with torch.log
and torch.mean, two Adam optimizers, the discriminator's backward with
retain_graph=True before the generator's step."""
import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=2e-3, atol=2e-4)


def main(torch, workdir):
    nn = torch.nn
    BATCH_SIZE, LR_G, LR_D, N_IDEAS, ART_COMPONENTS = 32, 0.0001, 0.0001, 5, 15
    PAINT_POINTS = np.vstack([np.linspace(-1, 1, ART_COMPONENTS) for _ in range(BATCH_SIZE)])
    rng = np.random.default_rng(33)

    def artist_works():
        a = rng.uniform(1, 2, size=BATCH_SIZE)[:, np.newaxis]
        paintings = a * np.power(PAINT_POINTS, 2) + (a - 1)
        paintings = torch.from_numpy(paintings).float()
        return paintings

    G = nn.Sequential(
        nn.Linear(N_IDEAS, 128),
        nn.ReLU(),
        nn.Linear(128, ART_COMPONENTS),
    )
    D = nn.Sequential(
        nn.Linear(ART_COMPONENTS, 128),
        nn.ReLU(),
        nn.Linear(128, 1),
        nn.Sigmoid(),
    )
    set_weights(torch, G, seed=33)
    set_weights(torch, D, seed=34)
    opt_D = torch.optim.Adam(D.parameters(), lr=LR_D)
    opt_G = torch.optim.Adam(G.parameters(), lr=LR_G)
    history = []
    for step in range(150):
        artist_paintings = artist_works()
        G_ideas = torch.from_numpy(rng.standard_normal((BATCH_SIZE, N_IDEAS)).astype(np.float32))
        G_paintings = G(G_ideas)
        prob_artist1 = D(G_paintings)
        G_loss = torch.mean(torch.log(1. - prob_artist1))
        opt_G.zero_grad()
        G_loss.backward()
        opt_G.step()

        prob_artist0 = D(artist_paintings)
        prob_artist1 = D(G_paintings.detach())
        D_loss = - torch.mean(torch.log(prob_artist0) + torch.log(1. - prob_artist1))
        opt_D.zero_grad()
        D_loss.backward(retain_graph=True)
        opt_D.step()
        if step % 50 == 0:
            history.append([prob_artist0.data.numpy().mean(), -D_loss.data.numpy().item()])
            print('D accuracy=%.2f (0.5 for D to converge)' % prob_artist0.data.numpy().mean())
    return dict(history=history, G_loss=G_loss, D_loss=D_loss, sample=G_paintings[0, ::3])
