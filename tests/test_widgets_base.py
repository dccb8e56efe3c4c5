import ipywidgets as w
import matplotlib.pyplot as plt

from attention_course.widgets import Explorer


class Doubler(Explorer):
    def __init__(self):
        super().__init__({"x": w.IntSlider(value=2, min=0, max=10)})
        self.drawn = 0

    def compute(self, x):
        return {"double": 2 * x}

    def draw(self, data):
        self.drawn += 1
        fig, ax = plt.subplots()
        ax.bar([0], [data["double"]])
        return fig


def test_setting_a_control_recomputes_the_data():
    e = Doubler()
    assert e.data == {"double": 4}
    e.controls["x"].value = 7
    assert e.data == {"double": 14} and e.redraws == 1
    assert e.drawn == 0            # nothing is drawn before the widget is displayed


def test_static_figure_reflects_current_values():
    e = Doubler()
    e.controls["x"].value = 3
    fig = e.figure()
    assert fig.axes[0].patches[0].get_height() == 6
    plt.close(fig)


def test_widget_holds_controls_then_output():
    e = Doubler()
    assert e.widget.children[-1] is e.output
    assert e.controls["x"] in e.widget.children[0].children


def test_every_widget_refuses_an_unknown_language():
    import inspect

    import pytest

    from attention_course.widgets import nb01, nb02, nb03, nb04, nb05, nb06, nb07

    classes = [cls for m in (nb01, nb02, nb03, nb04, nb05, nb06, nb07)
               for _, cls in inspect.getmembers(m, inspect.isclass)
               if issubclass(cls, Explorer) and cls.__module__ == m.__name__]
    assert len(classes) == 8
    for cls in classes:
        kwargs = {"rate": 1e9} if "rate" in inspect.signature(cls).parameters else {}
        with pytest.raises(ValueError, match="lang must be 'zh' or 'en'; got 'fr'"):
            cls(lang="fr", **kwargs)
